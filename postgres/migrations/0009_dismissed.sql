-- inbox schema on PostgreSQL, version 9: dismissed rows (inbox dismiss):
-- a parked row, or a parked (row, destination) pair, that a person judged
-- to need nothing. It keeps its reason; the row records when, who and
-- why (schema.sql says what each column holds). The checks are those of
-- schema.sql; the columns are added with no default, so no row is
-- written again. events_check, deliveries_check and delivery_history_check
-- are the names PostgreSQL gave the unnamed reason checks of 0001, 0004
-- and 0005.

ALTER TABLE events
  DROP CONSTRAINT events_status_check,
  DROP CONSTRAINT events_check,
  ADD CONSTRAINT events_status_check CHECK (status IN ('new', 'done', 'parked', 'ignored', 'dismissed')),
  ADD CONSTRAINT events_reason_check CHECK ((status IN ('parked', 'dismissed')) = (reason IS NOT NULL)),
  ADD COLUMN dismissed_at bigint CHECK (status <> 'dismissed' OR dismissed_at IS NOT NULL),
  ADD COLUMN dismissed_by text CHECK ((dismissed_at IS NULL) = (dismissed_by IS NULL)),
  ADD COLUMN dismiss_note text CHECK ((dismissed_at IS NULL) = (dismiss_note IS NULL));

ALTER TABLE deliveries
  DROP CONSTRAINT deliveries_status_check,
  DROP CONSTRAINT deliveries_check,
  ADD CONSTRAINT deliveries_status_check CHECK (status IN ('new', 'done', 'parked', 'dismissed')),
  ADD CONSTRAINT deliveries_reason_check CHECK ((status IN ('parked', 'dismissed')) = (reason IS NOT NULL));

ALTER TABLE delivery_history
  DROP CONSTRAINT delivery_history_status_check,
  DROP CONSTRAINT delivery_history_check,
  ADD CONSTRAINT delivery_history_status_check CHECK (status IN ('done', 'parked', 'dismissed')),
  ADD CONSTRAINT delivery_history_reason_check CHECK ((status IN ('parked', 'dismissed')) = (reason IS NOT NULL));
