-- The earlier series of attempts of (row, destination) pairs, kept when
-- inbox replay makes a pair new again (schema.sql says what each column
-- holds).
CREATE TABLE delivery_history (
  event_id    text    COLLATE "C" NOT NULL REFERENCES events (id) ON DELETE CASCADE,
  destination text    COLLATE "C" NOT NULL CHECK (destination <> ''),
  series      integer NOT NULL CHECK (series >= 1),
  status      text    NOT NULL CHECK (status IN ('done', 'parked')),
  reason      text    CHECK ((status = 'parked') = (reason IS NOT NULL)),
  attempts    integer NOT NULL CHECK (attempts >= 0),
  last_error  text,
  updated_at  bigint  NOT NULL,
  done_at     bigint,
  replayed_at bigint  NOT NULL,
  PRIMARY KEY (event_id, destination, series)
);
