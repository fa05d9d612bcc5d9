-- inbox schema on PostgreSQL, version 6: each source's run of requests
-- that failed verification (answered 401) since it last verified a
-- delivery (schema.sql's unverified), so inbox alert --failing-for can
-- tell a broken secret rotation from a few forgeries. Nothing of a request
-- is kept. Each serve adds its failures at most once a minute and on
-- shutdown, after its secret uses: a run that began at or before the
-- source's newest secret_uses.last_verified_at is over.

CREATE TABLE unverified (
  source   text   COLLATE "C" NOT NULL PRIMARY KEY,
  -- How many requests failed since first_at.
  count    bigint NOT NULL CHECK (count > 0),
  -- When the first and the last of them came (Unix ms).
  first_at bigint NOT NULL,
  last_at  bigint NOT NULL CHECK (last_at >= first_at)
);
