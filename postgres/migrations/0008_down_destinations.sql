-- inbox schema on PostgreSQL, version 8: destinations a dispatcher found
-- down (schema.sql's down_destinations): their rows wait with no attempt
-- counted while one probes them; inbox stats and inbox alert --down-for
-- read it.

CREATE TABLE down_destinations (
  name  text   COLLATE "C" NOT NULL PRIMARY KEY,
  -- Since when (Unix ms), and the last failure's error.
  since bigint NOT NULL,
  cause text   NOT NULL
);
