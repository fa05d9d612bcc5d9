-- The schema of the inbox before the status dismissed, without its
-- comments: a database an earlier inbox made, which sqlite/migrate.go
-- rebuilds.

CREATE TABLE IF NOT EXISTS events (
  id           TEXT    NOT NULL PRIMARY KEY,
  job_id       TEXT,
  status       TEXT    NOT NULL CHECK (status = 'new' OR status = 'done' OR status = 'parked' OR status = 'ignored'),
  reason       TEXT    CHECK ((status = 'parked') = (reason IS NOT NULL)),
  event        TEXT,
  job_status   TEXT,
  result_url   TEXT,
  body         BLOB    NOT NULL,
  size         INTEGER NOT NULL CHECK (size >= 0),
  sha256       TEXT    NOT NULL,
  delivery_ts  INTEGER NOT NULL,
  received_at  INTEGER NOT NULL,
  deliveries   INTEGER NOT NULL DEFAULT 1 CHECK (deliveries >= 1),
  last_seen_at INTEGER NOT NULL,
  updated_at   INTEGER NOT NULL,
  attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  next_attempt_at INTEGER NOT NULL DEFAULT 0,
  lease_owner     TEXT,
  lease_until     INTEGER CHECK ((lease_owner IS NULL) = (lease_until IS NULL)),
  last_error      TEXT,
  done_at         INTEGER,
  source          TEXT    NOT NULL DEFAULT 'sume' CHECK (source <> ''),
  response        BLOB
) STRICT;

CREATE TABLE IF NOT EXISTS secret_uses (
  source           TEXT    NOT NULL,
  fingerprint      TEXT    NOT NULL,
  last_verified_at INTEGER NOT NULL,
  PRIMARY KEY (source, fingerprint)
) STRICT;

CREATE TABLE IF NOT EXISTS unverified (
  source   TEXT    NOT NULL PRIMARY KEY,
  count    INTEGER NOT NULL CHECK (count > 0),
  first_at INTEGER NOT NULL,
  last_at  INTEGER NOT NULL CHECK (last_at >= first_at)
) STRICT;

CREATE TABLE IF NOT EXISTS probe (
  id INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
  at INTEGER NOT NULL
) STRICT;

CREATE TABLE IF NOT EXISTS probe_pad (
  id  INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
  pad BLOB    NOT NULL
) STRICT;

CREATE INDEX IF NOT EXISTS events_queue ON events (status, next_attempt_at, received_at);
CREATE INDEX IF NOT EXISTS events_settled_received ON events (status, received_at) WHERE status <> 'new';
CREATE INDEX IF NOT EXISTS events_settled_last_seen ON events (status, last_seen_at) WHERE status <> 'new';
CREATE INDEX IF NOT EXISTS events_beside_job ON events (job_id) WHERE job_id <> id;
DROP INDEX IF EXISTS events_status_received;
DROP INDEX IF EXISTS events_status_last_seen;
DROP INDEX IF EXISTS events_job_id;

CREATE TABLE IF NOT EXISTS refusals (
  source           TEXT    NOT NULL CHECK (source <> ''),
  key              TEXT    NOT NULL,
  job_id           TEXT,
  event            TEXT,
  first_refused_at INTEGER NOT NULL,
  last_refused_at  INTEGER NOT NULL CHECK (last_refused_at >= first_refused_at),
  refusals         INTEGER NOT NULL CHECK (refusals >= 1),
  PRIMARY KEY (source, key)
) STRICT;

CREATE TABLE IF NOT EXISTS expectations (
  source        TEXT    NOT NULL DEFAULT 'sume' CHECK (source <> ''),
  job_id        TEXT    NOT NULL,
  status_url    TEXT,
  expected_at   INTEGER NOT NULL,
  due_at        INTEGER NOT NULL,
  state         TEXT    NOT NULL CHECK (state IN ('waiting', 'done', 'closed')),
  reason        TEXT    CHECK ((state = 'closed') = (reason IS NOT NULL)),
  settled_at    INTEGER,
  next_poll_at  INTEGER NOT NULL,
  lease_owner   TEXT,
  lease_until   INTEGER CHECK ((lease_owner IS NULL) = (lease_until IS NULL)),
  polls         INTEGER NOT NULL DEFAULT 0 CHECK (polls >= 0),
  redeliveries  INTEGER NOT NULL DEFAULT 0 CHECK (redeliveries >= 0),
  job_status    TEXT,
  polled_at     INTEGER,
  last_error    TEXT,
  PRIMARY KEY (source, job_id)
) STRICT;
CREATE INDEX IF NOT EXISTS expectations_due ON expectations (state, next_poll_at);

CREATE TABLE IF NOT EXISTS deliveries (
  event_id        TEXT    NOT NULL,
  destination     TEXT    NOT NULL CHECK (destination <> ''),
  status          TEXT    NOT NULL CHECK (status = 'new' OR status = 'done' OR status = 'parked'),
  reason          TEXT    CHECK ((status = 'parked') = (reason IS NOT NULL)),
  attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  next_attempt_at INTEGER NOT NULL DEFAULT 0,
  lease_owner     TEXT,
  lease_until     INTEGER CHECK ((lease_owner IS NULL) = (lease_until IS NULL)),
  last_error      TEXT,
  received_at     INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL,
  done_at         INTEGER,
  PRIMARY KEY (event_id, destination)
) STRICT;
CREATE INDEX IF NOT EXISTS deliveries_queue ON deliveries (destination, status, next_attempt_at, received_at);
CREATE TRIGGER IF NOT EXISTS events_deliveries_delete AFTER DELETE ON events
BEGIN
  DELETE FROM deliveries WHERE event_id = old.id;
END;

CREATE TABLE IF NOT EXISTS paused_destinations (
  name      TEXT    NOT NULL PRIMARY KEY,
  paused_at INTEGER NOT NULL
) STRICT;

CREATE TABLE IF NOT EXISTS down_destinations (
  name  TEXT    NOT NULL PRIMARY KEY,
  since INTEGER NOT NULL,
  cause TEXT    NOT NULL
) STRICT;

CREATE TABLE IF NOT EXISTS routings (
  owner   TEXT    NOT NULL PRIMARY KEY CHECK (owner <> ''),
  routes  TEXT    NOT NULL,
  seen_at INTEGER NOT NULL
) STRICT;

CREATE TABLE IF NOT EXISTS delivery_history (
  event_id    TEXT    NOT NULL,
  destination TEXT    NOT NULL CHECK (destination <> ''),
  series      INTEGER NOT NULL CHECK (series >= 1),
  status      TEXT    NOT NULL CHECK (status = 'done' OR status = 'parked'),
  reason      TEXT    CHECK ((status = 'parked') = (reason IS NOT NULL)),
  attempts    INTEGER NOT NULL CHECK (attempts >= 0),
  last_error  TEXT,
  updated_at  INTEGER NOT NULL,
  done_at     INTEGER,
  replayed_at INTEGER NOT NULL,
  PRIMARY KEY (event_id, destination, series)
) STRICT;
CREATE TRIGGER IF NOT EXISTS events_delivery_history_delete AFTER DELETE ON events
BEGIN
  DELETE FROM delivery_history WHERE event_id = old.id;
END;
