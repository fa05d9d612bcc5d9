-- The queue of (row, destination) pairs (schema.sql says what each column
-- holds): a row is handed to every destination whose filters take it, each
-- with its own attempts, lease, schedule and outcome. A new row with
-- next_attempt_at 0 is not routed yet.
CREATE TABLE deliveries (
  event_id        text    COLLATE "C" NOT NULL REFERENCES events (id) ON DELETE CASCADE,
  destination     text    COLLATE "C" NOT NULL CHECK (destination <> ''),
  status          text    NOT NULL CHECK (status IN ('new', 'done', 'parked')),
  reason          text    CHECK ((status = 'parked') = (reason IS NOT NULL)),
  attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  next_attempt_at bigint  NOT NULL DEFAULT 0,
  lease_owner     text,
  lease_until     bigint  CHECK ((lease_owner IS NULL) = (lease_until IS NULL)),
  last_error      text,
  received_at     bigint  NOT NULL,
  updated_at      bigint  NOT NULL,
  done_at         bigint,
  PRIMARY KEY (event_id, destination)
);
CREATE INDEX deliveries_queue ON deliveries (destination, status, next_attempt_at, received_at);

-- Destinations an operator paused (inbox pause).
CREATE TABLE paused_destinations (
  name      text   COLLATE "C" NOT NULL PRIMARY KEY,
  paused_at bigint NOT NULL
);

-- The rows stored before destinations keep their queue state as the pair
-- of destination default (the single-destination flags' destination).
INSERT INTO deliveries (event_id, destination, status, reason, attempts, next_attempt_at,
    lease_owner, lease_until, last_error, received_at, updated_at, done_at)
  SELECT id, 'default', status, reason, attempts, CASE WHEN status = 'new' THEN greatest(next_attempt_at, 1) ELSE 0 END,
    lease_owner, lease_until, last_error, received_at, updated_at, done_at
  FROM events WHERE status IN ('new', 'done') OR (status = 'parked' AND reason IN ('handler_failed', 'handler_rejected'));
UPDATE events SET next_attempt_at = 1 WHERE status = 'new' AND next_attempt_at = 0;
