-- inbox schema on PostgreSQL, version 10: what inbox alert last reported
-- of each finding still open (schema.sql's alerts), so that with --notify
-- or --on-change it reports a change once, and a resolve once.

CREATE TABLE alerts (
  scope       text   COLLATE "C" NOT NULL CHECK (scope <> ''),
  finding     text   COLLATE "C" NOT NULL CHECK (finding <> ''),
  -- Unix ms: first and last reported.
  opened_at   bigint NOT NULL,
  count       bigint NOT NULL CHECK (count >= 0),
  reported_at bigint NOT NULL,
  rev         bigint NOT NULL CHECK (rev >= 1),
  PRIMARY KEY (scope, finding)
);
