-- inbox schema. Applied on every start; every statement is idempotent.
-- Times are Unix milliseconds (UTC) so they sort and compare as integers.

CREATE TABLE IF NOT EXISTS events (
  -- The row's key. A job event is keyed by its job_id, so every retry and
  -- every later redelivery of that job lands on this one row. A body with no
  -- usable job_id, and a delivery that cannot take its job's row (a conflict),
  -- is keyed 'sha256:<hex of the body>', so retries of the same bytes still
  -- land on one row.
  id           TEXT    NOT NULL PRIMARY KEY,
  -- The job_id the body names, also on parked and conflict rows; NULL when
  -- the body names none. For another source than 'sume' it is the row id
  -- of the key ('<source>/<key>'), so a key's own row has job_id = id, as a
  -- Sume job row does, and enters no partial index.
  job_id       TEXT,
  -- new: stored, waiting for the application (claimed or not, see lease_*);
  -- done: handed on; parked: never processable as received, or given up on
  -- by the dispatcher, see reason; ignored: a test ping; dismissed: parked,
  -- then judged by a person to need nothing (inbox dismiss, see
  -- dismissed_at). Comparisons, not IN: SQLite checks an IN list of more
  -- than two values by building a temporary table of them for every row
  -- inserted. A file made before dismissed existed has its table rebuilt
  -- once, with these checks (sqlite/migrate.go).
  status       TEXT    NOT NULL CHECK (status = 'new' OR status = 'done' OR status = 'parked' OR status = 'ignored' OR status = 'dismissed'),
  -- Why a row is parked: unparseable, missing_job_id, unknown_event,
  -- payload_too_large, too_large, conflict, missing_key, unknown_job (set
  -- on receipt), handler_failed,
  -- handler_rejected (set by the dispatcher). Set exactly when status is
  -- parked or dismissed (a dismissed row keeps the reason it was parked with).
  reason       TEXT    CHECK ((status = 'parked' OR status = 'dismissed') = (reason IS NOT NULL)),
  -- The body's "event" field (job.completed, ...), NULL when unreadable.
  event        TEXT,
  -- The body's "status" field (COMPLETED, ERROR, ...), NULL when absent.
  job_status   TEXT,
  -- The result URL of a payload_too_large delivery, to fetch it from.
  result_url   TEXT,
  -- The raw body exactly as received and verified.
  body         BLOB    NOT NULL,
  size         INTEGER NOT NULL CHECK (size >= 0),
  sha256       TEXT    NOT NULL,
  -- The signed delivery timestamp (Unix seconds) of the delivery whose body
  -- is stored: the verification on record.
  delivery_ts  INTEGER NOT NULL,
  received_at  INTEGER NOT NULL,
  -- How many verified deliveries landed on this row, and when the last did.
  deliveries   INTEGER NOT NULL DEFAULT 1 CHECK (deliveries >= 1),
  last_seen_at INTEGER NOT NULL,
  -- When the row last changed status (parked, revived, handed on).
  updated_at   INTEGER NOT NULL,
  -- The columns below hand new rows to the application (the dispatcher).
  -- They were added after the first version: sqlite.Open adds them to an
  -- older database (sqlite/migrate.go declares them again, for that).
  --
  -- Delivery attempts made for the row's current body, counted when a
  -- dispatcher claims it; reprocess resets it.
  attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  -- The earliest time a dispatcher may claim the row: 0 for a fresh row,
  -- the scheduled retry after a failed attempt, the lease's end while the
  -- row is claimed (so a row whose dispatcher died is claimable again once
  -- its lease runs out, with no sweeper).
  next_attempt_at INTEGER NOT NULL DEFAULT 0,
  -- Who holds the claim (a dispatcher's host:pid:random), NULL when none.
  lease_owner     TEXT,
  -- Until when the claim holds, NULL when none.
  lease_until     INTEGER CHECK ((lease_owner IS NULL) = (lease_until IS NULL)),
  -- The last failed attempt's error, bounded; never the body.
  last_error      TEXT,
  -- When the application took the row (status done), NULL before.
  done_at         INTEGER,
  -- The configured source the row came through (/webhooks/<source>). Rows
  -- are keyed by (source, key), folded into the one primary key id: a
  -- 'sume' row's id is its bare key, as before sources existed, and any
  -- other source's is '<source>/<key>' (source names hold no '/'). So no
  -- table rebuild was needed, CLI ids stay what they were, and the insert
  -- still enters only the primary key and the queue.
  source          TEXT    NOT NULL DEFAULT 'sume' CHECK (source <> ''),
  -- The answer body saved with the row and given again to every repeat of
  -- its key (Vibe's 202 body); NULL for sources that answer without one.
  response        BLOB,
  -- The dismissal (inbox dismiss): when, who ran it (the OS user) and the
  -- note they gave. Set on every dismissed row, and on a row still new or
  -- parked for another destination whose parked pairs were dismissed;
  -- cleared when a delivery, reprocess or replay brings a dismissed row back.
  dismissed_at    INTEGER CHECK (status <> 'dismissed' OR dismissed_at IS NOT NULL),
  dismissed_by    TEXT    CHECK ((dismissed_at IS NULL) = (dismissed_by IS NULL)),
  dismiss_note    TEXT    CHECK ((dismissed_at IS NULL) = (dismiss_note IS NULL))
) STRICT;

-- When each configured secret last verified a delivery, so an operator
-- knows when a retired one can go. The secret is never stored: only the
-- first 4 bytes of its key's sha256, in hex (8 characters). serve writes it at most once a minute
-- and on shutdown.
CREATE TABLE IF NOT EXISTS secret_uses (
  source           TEXT    NOT NULL,
  fingerprint      TEXT    NOT NULL,
  last_verified_at INTEGER NOT NULL,
  PRIMARY KEY (source, fingerprint)
) STRICT;

-- Each source's run of requests that failed verification (answered 401)
-- since it last verified a delivery, so inbox alert --failing-for can tell
-- a broken secret rotation from a few forgeries. Nothing of a request is
-- kept. serve writes it at most once a minute and on shutdown, after the
-- secret uses: a run that began at or before the source's newest
-- last_verified_at is over, and the next failures start a new one.
CREATE TABLE IF NOT EXISTS unverified (
  source   TEXT    NOT NULL PRIMARY KEY,
  -- How many requests failed since first_at.
  count    INTEGER NOT NULL CHECK (count > 0),
  -- When the first and the last of them came (Unix ms).
  first_at INTEGER NOT NULL,
  last_at  INTEGER NOT NULL CHECK (last_at >= first_at)
) STRICT;

-- One row that /readyz rewrites: an empty transaction writes nothing, so
-- only a commit that reaches the disk tells whether deliveries can (a full
-- disk, an I/O error or a read-only file system fails it, as it fails them).
CREATE TABLE IF NOT EXISTS probe (
  id INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
  -- When the last probe committed.
  at INTEGER NOT NULL
) STRICT;

-- What /readyz writes beside the probe row: as many bytes as the largest
-- delivery of a commit that failed (none while commits succeed), so a disk
-- that still takes the probe row but no delivery fails the probe too.
CREATE TABLE IF NOT EXISTS probe_pad (
  id  INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
  pad BLOB    NOT NULL
) STRICT;

-- Every index a new row enters costs the writer a b-tree insert and more
-- WAL pages per commit, so only the queue takes new rows. The others are
-- partial: they hold rows that have left 'new' (parked, done, ignored), and a
-- query that wants them repeats the index's condition word for word, since
-- SQLite uses a partial index only when the query's WHERE names it.
-- The queue: the next claimable new row is the first 'new' entry, so a
-- claim reads only the rows it takes. (Not a partial index on status = 'new':
-- without ANALYZE the planner would prefer another index and sort.) It also
-- serves listing new rows.
CREATE INDEX IF NOT EXISTS events_queue ON events (status, next_attempt_at, received_at);
-- list, parked and alert over rows that have left 'new'.
CREATE INDEX IF NOT EXISTS events_settled_received ON events (status, received_at) WHERE status <> 'new';
-- purge's retention counts from the last delivery.
CREATE INDEX IF NOT EXISTS events_settled_last_seen ON events (status, last_seen_at) WHERE status <> 'new';
-- The rows kept beside a job's row (conflicts, poison repeats), by job.
CREATE INDEX IF NOT EXISTS events_beside_job ON events (job_id) WHERE job_id <> id;
-- Whole indexes made by earlier versions, replaced by the partial ones above.
DROP INDEX IF EXISTS events_status_received;
DROP INDEX IF EXISTS events_status_last_seen;
DROP INDEX IF EXISTS events_job_id;

-- Deliveries that verified but were answered 503 because the store could
-- not take them, and whose key has not been delivered since: the jobs the
-- provider may give up on. serve keeps them in memory while the store is
-- down and writes them here once it takes writes again; a later delivery
-- of the key deletes its row, in the same transaction that stores it.
CREATE TABLE IF NOT EXISTS refusals (
  -- The source the delivery came through.
  source           TEXT    NOT NULL CHECK (source <> ''),
  -- The row id the delivery would have landed on (a Sume job's job_id).
  key              TEXT    NOT NULL,
  -- The job the body names (for Sume, what redeliver asks for), NULL when none.
  job_id           TEXT,
  -- The body's event name, NULL when unreadable.
  event            TEXT,
  -- When the key was first and last refused, and how many times.
  first_refused_at INTEGER NOT NULL,
  last_refused_at  INTEGER NOT NULL CHECK (last_refused_at >= first_refused_at),
  refusals         INTEGER NOT NULL CHECK (refusals >= 1),
  PRIMARY KEY (source, key)
) STRICT;

-- Jobs the application started and expects a delivery for (inbox expect,
-- or POST /expect on the admin address). One that is not delivered by its
-- due time is polled at the provider's API and, once terminal, redelivered.
CREATE TABLE IF NOT EXISTS expectations (
  source        TEXT    NOT NULL DEFAULT 'sume' CHECK (source <> ''),
  job_id        TEXT    NOT NULL,
  -- Where the job's status is read; NULL: the API URL + /v1/jobs/{job_id}.
  status_url    TEXT,
  -- When the expectation was registered, and when the delivery is due.
  expected_at   INTEGER NOT NULL,
  due_at        INTEGER NOT NULL,
  -- waiting: no delivery yet; done: the job was delivered; closed: given
  -- up, see reason.
  state         TEXT    NOT NULL CHECK (state IN ('waiting', 'done', 'closed')),
  -- Why a closed expectation was given up, for a person. Set exactly when closed.
  reason        TEXT    CHECK ((state = 'closed') = (reason IS NOT NULL)),
  -- When it became done or closed, NULL before.
  settled_at    INTEGER,
  -- The earliest time a poller may poll it: due_at at first, the lease's
  -- end while a poller holds it, then the backoff's next time.
  next_poll_at  INTEGER NOT NULL,
  -- Who holds the poll (host:pid:random) until when, NULL when none.
  lease_owner   TEXT,
  lease_until   INTEGER CHECK ((lease_owner IS NULL) = (lease_until IS NULL)),
  -- Polls claimed, and redeliveries the provider accepted.
  polls         INTEGER NOT NULL DEFAULT 0 CHECK (polls >= 0),
  redeliveries  INTEGER NOT NULL DEFAULT 0 CHECK (redeliveries >= 0),
  -- The job's status as the provider last reported it, and when.
  job_status    TEXT,
  polled_at     INTEGER,
  -- The last poll's error, bounded; never the API key.
  last_error    TEXT,
  PRIMARY KEY (source, job_id)
) STRICT;
-- The poller's claim: the first waiting expectations that are due.
CREATE INDEX IF NOT EXISTS expectations_due ON expectations (state, next_poll_at);

-- The queue of (row, destination) pairs: a row is handed to every
-- configured destination whose filters take it, each with its own
-- attempts, lease, schedule and outcome. A dispatcher routes a new row
-- (events.next_attempt_at 0: stored, revived or reprocessed since) when it
-- first claims, so a destination configured later gets only the rows routed
-- after it was. The row's own queue columns mirror its pairs: new while
-- any pair is new, else parked while any is parked, else done.
CREATE TABLE IF NOT EXISTS deliveries (
  event_id        TEXT    NOT NULL,
  destination     TEXT    NOT NULL CHECK (destination <> ''),
  -- new: the destination has yet to take it; done: it took it; parked:
  -- given up on for this destination, see reason; dismissed: parked, then
  -- dismissed (inbox dismiss), keeping its reason. Comparisons, not IN,
  -- as on events: every pair routed and settled is checked. A file made
  -- before dismissed existed has its table rebuilt once, as events.
  status          TEXT    NOT NULL CHECK (status = 'new' OR status = 'done' OR status = 'parked' OR status = 'dismissed'),
  reason          TEXT    CHECK ((status = 'parked' OR status = 'dismissed') = (reason IS NOT NULL)),
  -- As on events: attempts counted as they start, the earliest time a
  -- dispatcher may claim the pair, the claim, the last error (never the body).
  attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  next_attempt_at INTEGER NOT NULL DEFAULT 0,
  lease_owner     TEXT,
  lease_until     INTEGER CHECK ((lease_owner IS NULL) = (lease_until IS NULL)),
  last_error      TEXT,
  -- The row's received_at, so a claim takes the oldest due pairs first
  -- from the index alone.
  received_at     INTEGER NOT NULL,
  -- When the pair last changed, and when the destination took it.
  updated_at      INTEGER NOT NULL,
  done_at         INTEGER,
  PRIMARY KEY (event_id, destination)
) STRICT;
-- A destination's claim: its first due new pairs.
CREATE INDEX IF NOT EXISTS deliveries_queue ON deliveries (destination, status, next_attempt_at, received_at);
-- A row's pairs go with it (purge, the probe).
CREATE TRIGGER IF NOT EXISTS events_deliveries_delete AFTER DELETE ON events
BEGIN
  DELETE FROM deliveries WHERE event_id = old.id;
END;

-- Destinations an operator paused (inbox pause): no dispatcher claims
-- their pairs until inbox resume, so they wait with no attempt counted.
CREATE TABLE IF NOT EXISTS paused_destinations (
  name      TEXT    NOT NULL PRIMARY KEY,
  paused_at INTEGER NOT NULL
) STRICT;

-- Destinations a dispatcher found down (no answer, timeouts, 429,
-- 502-504, or the same failure for several rows in a row): their rows
-- wait with no attempt counted while one probes them. inbox stats and
-- inbox alert --down-for read it; the dispatcher deletes its row once the
-- destination is up again (or a reload removes it), writes it again every
-- 30 s while down, and leaves it when it stops: the next one probes first.
CREATE TABLE IF NOT EXISTS down_destinations (
  name  TEXT    NOT NULL PRIMARY KEY,
  since INTEGER NOT NULL, -- Unix ms
  cause TEXT    NOT NULL
) STRICT;

-- The destination table each running dispatcher routes new rows by, as
-- it last recorded it (at start, at each reload, every few seconds), so
-- that a destination no running dispatcher has and two dispatchers routing
-- by different tables are found and said. A dispatcher that stops deletes
-- its row; one killed is no longer live once its seen_at is old.
CREATE TABLE IF NOT EXISTS routings (
  owner   TEXT    NOT NULL PRIMARY KEY CHECK (owner <> ''),
  -- The routes as JSON (inbox.EncodeRoutes): names and filters, nothing else.
  routes  TEXT    NOT NULL,
  seen_at INTEGER NOT NULL
) STRICT;

-- The earlier series of attempts of (row, destination) pairs: what a pair
-- held when inbox replay made it new again, so show still tells what
-- became of each earlier hand-over.
CREATE TABLE IF NOT EXISTS delivery_history (
  event_id    TEXT    NOT NULL,
  destination TEXT    NOT NULL CHECK (destination <> ''),
  -- The pair's series, from 1, oldest first; the pair's own is the next.
  series      INTEGER NOT NULL CHECK (series >= 1),
  -- As the pair held them when it was replayed: done, parked or
  -- dismissed, why, the attempts, the last error, when it last changed
  -- and was taken.
  status      TEXT    NOT NULL CHECK (status = 'done' OR status = 'parked' OR status = 'dismissed'),
  reason      TEXT    CHECK ((status = 'parked' OR status = 'dismissed') = (reason IS NOT NULL)),
  attempts    INTEGER NOT NULL CHECK (attempts >= 0),
  last_error  TEXT,
  updated_at  INTEGER NOT NULL,
  done_at     INTEGER,
  -- When the replay replaced the series.
  replayed_at INTEGER NOT NULL,
  PRIMARY KEY (event_id, destination, series)
) STRICT;
-- A row's history goes with it.
CREATE TRIGGER IF NOT EXISTS events_delivery_history_delete AFTER DELETE ON events
BEGIN
  DELETE FROM delivery_history WHERE event_id = old.id;
END;

-- What inbox alert last reported of each finding still open, so that with
-- --notify or --on-change it reports a finding when it opens, grows
-- (doubles) or has been open --repeat long, and once more when it
-- resolves, and is silent between. A run reads and writes the rows of its
-- own scope only; every write is conditional on rev (the row as read), so
-- of two runs at once one reports a change. A resolved finding's row is
-- deleted once its resolve is reported.
CREATE TABLE IF NOT EXISTS alerts (
  -- The check, its settings and where it reports (never a URL: a digest).
  scope       TEXT    NOT NULL CHECK (scope <> ''),
  -- What within the check: "unknown_event parked longer than 24h", "quiet vibe".
  finding     TEXT    NOT NULL CHECK (finding <> ''),
  opened_at   INTEGER NOT NULL, -- Unix ms, first reported
  count       INTEGER NOT NULL CHECK (count >= 0), -- its size when last reported
  reported_at INTEGER NOT NULL, -- Unix ms, last reported
  rev         INTEGER NOT NULL CHECK (rev >= 1), -- bumped by every write
  PRIMARY KEY (scope, finding)
) STRICT;
