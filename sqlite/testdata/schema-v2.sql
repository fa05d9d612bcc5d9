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
  -- the body names none.
  job_id       TEXT,
  -- new: stored, waiting for the application (claimed or not, see lease_*);
  -- done: handed on; parked: never processable as received, or given up on
  -- by the dispatcher, see reason; ignored: a test ping.
  status       TEXT    NOT NULL CHECK (status IN ('new', 'done', 'parked', 'ignored')),
  -- Why a row is parked: unparseable, missing_job_id, unknown_event,
  -- payload_too_large, too_large, conflict (set on receipt), handler_failed,
  -- handler_rejected (set by the dispatcher). Set exactly when status is parked.
  reason       TEXT    CHECK ((status = 'parked') = (reason IS NOT NULL)),
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
  -- They were added after the first version: inbox.Open adds them to an
  -- older database (inbox/migrate.go declares them again, for that).
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
  done_at         INTEGER
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
