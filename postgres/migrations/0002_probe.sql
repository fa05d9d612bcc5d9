-- inbox schema on PostgreSQL, version 2: the probe table /readyz rewrites
-- (schema.sql's probe). An empty transaction writes nothing, so only a
-- commit that writes tells whether deliveries can. One row per store
-- (replica), keyed by an id it draws at start, so no replica's probe waits
-- for another's commit; Close deletes its row, Open those of replicas
-- that ended without Close a week ago.

CREATE TABLE probe (
  id text   COLLATE "C" NOT NULL PRIMARY KEY,
  -- When the last probe committed, on the store's clock.
  at bigint NOT NULL
);
