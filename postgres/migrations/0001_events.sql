-- inbox schema on PostgreSQL, version 1: the columns and meanings of the
-- top-level schema.sql (read it for each column), in PostgreSQL's types.
-- Times are Unix milliseconds (UTC) in bigint, as in SQLite, so the two
-- stores read and compare them alike. Bodies and saved answers are bytea:
-- jsonb would rewrite a body (key order, spaces, duplicate keys) and json
-- refuses bytes that are not UTF-8, and the bytes are what was verified.
-- Keys sort bytewise (COLLATE "C"), as in SQLite and in Go.

CREATE TABLE events (
  id              text    COLLATE "C" NOT NULL PRIMARY KEY,
  job_id          text    COLLATE "C",
  status          text    NOT NULL CHECK (status IN ('new', 'done', 'parked', 'ignored')),
  reason          text    COLLATE "C" CHECK ((status = 'parked') = (reason IS NOT NULL)),
  event           text,
  job_status      text,
  result_url      text,
  body            bytea   NOT NULL,
  size            bigint  NOT NULL CHECK (size >= 0),
  sha256          text    NOT NULL,
  delivery_ts     bigint  NOT NULL,
  received_at     bigint  NOT NULL,
  deliveries      bigint  NOT NULL DEFAULT 1 CHECK (deliveries >= 1),
  last_seen_at    bigint  NOT NULL,
  updated_at      bigint  NOT NULL,
  attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  next_attempt_at bigint  NOT NULL DEFAULT 0,
  lease_owner     text,
  lease_until     bigint  CHECK ((lease_owner IS NULL) = (lease_until IS NULL)),
  last_error      text,
  done_at         bigint,
  source          text    COLLATE "C" NOT NULL DEFAULT 'sume' CHECK (source <> ''),
  response        bytea
);

-- The queue: claims read the first due 'new' entries.
CREATE INDEX events_queue ON events (status, next_attempt_at, received_at);
-- list, parked and alert over rows that have left 'new'.
CREATE INDEX events_settled_received ON events (status, received_at) WHERE status <> 'new';
-- purge's retention counts from the last delivery.
CREATE INDEX events_settled_last_seen ON events (status, last_seen_at) WHERE status <> 'new';
-- The rows kept beside a job's row (conflicts, poison repeats), by job.
CREATE INDEX events_beside_job ON events (job_id) WHERE job_id <> id;

-- When each configured secret last verified a delivery; the secret is
-- never stored, only its fingerprint.
CREATE TABLE secret_uses (
  source           text   COLLATE "C" NOT NULL,
  fingerprint      text   COLLATE "C" NOT NULL,
  last_verified_at bigint NOT NULL,
  PRIMARY KEY (source, fingerprint)
);
