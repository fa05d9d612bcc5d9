package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"inbox/inbox"
	"inbox/sqlrow"
)

// The (row, destination) pairs of the queue: what each destination still
// has to take, in the deliveries table, routed, mirrored onto the rows and
// paused by the statements here.

// Unrouted returns up to max new rows not yet routed (next_attempt_at 0),
// oldest first, passing over rows another transaction holds, so replicas
// route each row once.
func (t queueTx) Unrouted(max int) ([]inbox.Unrouted, error) {
	rows, err := t.tx.Query(t.ctx, `SELECT id, source, coalesce(event, '') FROM events
		WHERE status = 'new' AND next_attempt_at = 0 ORDER BY received_at LIMIT $1
		FOR UPDATE SKIP LOCKED`, max)
	if err != nil {
		return nil, fmt.Errorf("read the rows to route: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (inbox.Unrouted, error) {
		var u inbox.Unrouted
		return u, r.Scan(&u.ID, &u.Source, &u.Event)
	})
	if err != nil {
		return nil, fmt.Errorf("read the rows to route: %w", err)
	}
	return out, nil
}

// AddPairs adds pairs, due at now; a parked or dismissed pair becomes new
// again.
func (t queueTx) AddPairs(pairs []inbox.Pair, now time.Time) error {
	if len(pairs) == 0 {
		return nil
	}
	ids, dests := pairArrays(pairs)
	_, err := t.tx.Exec(t.ctx, `INSERT INTO deliveries (event_id, destination, status, next_attempt_at, received_at, updated_at)
		SELECT u.id, u.dest, 'new', greatest($3::bigint, 1), e.received_at, $3::bigint
		FROM unnest($1::text[], $2::text[]) AS u(id, dest) JOIN events e ON e.id = u.id
		ON CONFLICT (event_id, destination) DO UPDATE SET status = 'new', reason = NULL, attempts = 0,
			next_attempt_at = excluded.next_attempt_at, lease_owner = NULL, lease_until = NULL,
			last_error = NULL, done_at = NULL, updated_at = excluded.updated_at
		WHERE deliveries.status = 'parked' OR deliveries.status = 'dismissed'`, ids, dests, t.at(now))
	if err != nil {
		return fmt.Errorf("route %d pairs: %w", len(pairs), err)
	}
	return nil
}

// Mirror sets the queue columns of the new rows of ids from their pairs,
// a row with no pair done at now, in one statement. It finds the rows by
// id: coalesce keeps the planner off the queue index on status, which it
// takes while its statistics say few rows are new and which then has it
// walk every new row (and its dead versions) for each call, a replay of
// many rows or a deep queue.
func (t queueTx) Mirror(ids []string, now time.Time) error {
	_, err := t.tx.Exec(t.ctx, `WITH m AS (SELECT e.id, count(d.event_id) AS n,
			CASE WHEN bool_or(d.status = 'new') THEN 'new' WHEN bool_or(d.status = 'parked') THEN 'parked' ELSE 'done' END AS status,
			max(d.attempts) AS attempts,
			min(d.next_attempt_at) FILTER (WHERE d.status = 'new') AS next_at,
			max(d.lease_owner) FILTER (WHERE d.status = 'new') AS owner,
			max(d.lease_until) FILTER (WHERE d.status = 'new') AS until,
			max(d.reason) FILTER (WHERE d.status = 'parked') AS reason,
			max(d.done_at) AS done_at, max(d.updated_at) AS at
			FROM events e LEFT JOIN deliveries d ON d.event_id = e.id
			WHERE e.id = ANY($1::text[]) AND coalesce(e.status, '') = 'new' GROUP BY e.id)
		UPDATE events e SET status = m.status, reason = CASE WHEN m.status = 'parked' THEN m.reason END,
			attempts = CASE WHEN m.n = 0 THEN e.attempts ELSE m.attempts END,
			next_attempt_at = CASE WHEN m.status = 'new' THEN m.next_at ELSE 0 END,
			lease_owner = m.owner, lease_until = m.until,
			last_error = CASE WHEN m.n = 0 THEN e.last_error ELSE coalesce((SELECT d.last_error FROM deliveries d
				WHERE d.event_id = e.id AND d.last_error IS NOT NULL ORDER BY d.updated_at DESC LIMIT 1), e.last_error) END,
			done_at = CASE WHEN m.status = 'done' THEN coalesce(m.done_at, $2) END,
			updated_at = CASE WHEN m.n = 0 THEN $2 WHEN m.status <> e.status THEN m.at ELSE e.updated_at END
		FROM m WHERE e.id = m.id AND coalesce(e.status, '') = 'new'`, ids, t.at(now))
	if err != nil {
		return fmt.Errorf("mirror %d rows: %w", len(ids), err)
	}
	return nil
}

// Deliveries returns where the row id stands with each destination it was
// routed to, by destination; none for a row not routed.
func (s *Store) Deliveries(ctx context.Context, id string) ([]inbox.Pairing, error) {
	out, err := sqlrow.Collect(ctx, s.query, `SELECT `+sqlrow.PairingColumns+`
		FROM deliveries WHERE event_id = $1 ORDER BY destination`, []any{id}, sqlrow.ScanPairing)
	if err != nil {
		return nil, fmt.Errorf("read the destinations of %s: %w", id, err)
	}
	return inbox.WithEarlier(id, out, func() (map[string][]inbox.Series, error) { return s.history(ctx, id) })
}

// Destinations counts each destination's pairs by status at now (on the
// caller's clock, placed on the store's), paused destinations with no pair
// included, by name.
func (s *Store) Destinations(ctx context.Context, now time.Time) ([]inbox.DestinationStats, error) {
	var ahead int64
	if !now.IsZero() {
		ahead = now.Sub(s.localNow()).Milliseconds()
	}
	return sqlrow.Destinations(ctx, s.query, `WITH c AS (SELECT coalesce($1::bigint, `+dbNow+`) + $2 AS now)
		SELECT destination, status, count(*),
			count(*) FILTER (WHERE status = 'new' AND lease_owner IS NOT NULL AND lease_until > c.now),
			count(*) FILTER (WHERE status = 'new' AND attempts > 0 AND next_attempt_at > c.now AND lease_owner IS NULL)
		FROM deliveries, c GROUP BY destination, status`, []any{s.clockArg(), ahead})
}

// PausedDestinations returns the destinations an operator paused, by name.
func (s *Store) PausedDestinations(ctx context.Context) ([]string, error) {
	return sqlrow.Paused(ctx, s.query)
}

// SetPaused pauses (or resumes) the destination name, for every dispatcher
// on the store.
func (s *Store) SetPaused(ctx context.Context, name string, paused bool) error {
	if s.readOnly {
		return fmt.Errorf("pause %s: store is read-only", name)
	}
	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	return s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		if paused {
			_, err = tx.Exec(ctx, `INSERT INTO paused_destinations (name, paused_at) VALUES ($1, `+dbNow+`)
				ON CONFLICT (name) DO NOTHING`, name)
		} else {
			_, err = tx.Exec(ctx, `DELETE FROM paused_destinations WHERE name = $1`, name)
		}
		if err != nil {
			return fmt.Errorf("pause %s: %w", name, err)
		}
		return nil
	})
}

// RecordRouting records (or, routes nil, forgets) the routing of the
// dispatcher owner.
func (s *Store) RecordRouting(ctx context.Context, owner string, routes []inbox.Route, now time.Time) error {
	if s.readOnly {
		return errors.New("record the routing: store is read-only")
	}
	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	return s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		if routes == nil {
			_, err = tx.Exec(ctx, `DELETE FROM routings WHERE owner = $1`, owner)
		} else {
			_, err = tx.Exec(ctx, `INSERT INTO routings (owner, routes, seen_at) VALUES ($1, $2, $3)
				ON CONFLICT (owner) DO UPDATE SET routes = excluded.routes, seen_at = excluded.seen_at`,
				owner, inbox.EncodeRoutes(routes), now.UnixMilli())
		}
		if err != nil {
			return fmt.Errorf("record the routing: %w", err)
		}
		return nil
	})
}

// Routings returns the routings recorded at or after since, by owner.
func (s *Store) Routings(ctx context.Context, since time.Time) ([]inbox.Routing, error) {
	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT owner, routes, seen_at FROM routings WHERE seen_at >= $1 ORDER BY owner`, since.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("read the routings: %w", err)
	}
	defer rows.Close()
	var out []inbox.Routing
	var owner, routes string
	var seen int64
	if _, err := pgx.ForEachRow(rows, []any{&owner, &routes, &seen}, func() error {
		r, err := inbox.ReadRouting(owner, routes, seen)
		out = append(out, r)
		return err
	}); err != nil {
		return nil, fmt.Errorf("read the routings: %w", err)
	}
	return out, nil
}

// DownDestinations returns the destinations a dispatcher found down, by
// name.
func (s *Store) DownDestinations(ctx context.Context) ([]inbox.DownDestination, error) {
	return sqlrow.Down(ctx, s.query)
}

// SetDown records the destination name down since since, for cause, or
// up (a zero since).
func (s *Store) SetDown(ctx context.Context, name string, since time.Time, cause string) error {
	if s.readOnly {
		return fmt.Errorf("record destination %s down: store is read-only", name)
	}
	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	return s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		if since.IsZero() {
			_, err = tx.Exec(ctx, `DELETE FROM down_destinations WHERE name = $1`, name)
		} else {
			_, err = tx.Exec(ctx, `INSERT INTO down_destinations (name, since, cause) VALUES ($1, $2, $3)
				ON CONFLICT (name) DO UPDATE SET since = excluded.since, cause = excluded.cause`, name, since.UnixMilli(), pgText(cause))
		}
		if err != nil {
			return fmt.Errorf("record destination %s down: %w", name, err)
		}
		return nil
	})
}

// pairArrays is pairs as the two arrays, ids and destinations, that the
// statements taking pairs unnest together.
func pairArrays(pairs []inbox.Pair) (ids, dests []string) {
	ids, dests = make([]string, len(pairs)), make([]string, len(pairs))
	for i, p := range pairs {
		ids[i], dests[i] = p.ID, p.Destination
	}
	return ids, dests
}
