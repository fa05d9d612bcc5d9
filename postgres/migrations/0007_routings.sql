-- inbox schema on PostgreSQL, version 7: the destination table each
-- running dispatcher routes new rows by (schema.sql's routings), so that a
-- destination no running dispatcher has and two dispatchers routing by
-- different tables are found and said.

CREATE TABLE routings (
  owner   text   COLLATE "C" NOT NULL PRIMARY KEY CHECK (owner <> ''),
  -- The routes as JSON (inbox.EncodeRoutes): names and filters only.
  routes  text   NOT NULL,
  -- When the dispatcher last recorded it (Unix ms).
  seen_at bigint NOT NULL
);
