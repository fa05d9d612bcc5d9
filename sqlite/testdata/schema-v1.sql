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
  -- new: stored, waiting for the application; done: handed on;
  -- parked: never processable as received, see reason; ignored: a test ping.
  status       TEXT    NOT NULL CHECK (status IN ('new', 'done', 'parked', 'ignored')),
  -- Why a row is parked: unparseable, missing_job_id, unknown_event,
  -- payload_too_large, too_large, conflict. Set exactly when status is parked.
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
  updated_at   INTEGER NOT NULL
) STRICT;

CREATE INDEX IF NOT EXISTS events_status_received ON events (status, received_at);
CREATE INDEX IF NOT EXISTS events_job_id ON events (job_id) WHERE job_id IS NOT NULL;
