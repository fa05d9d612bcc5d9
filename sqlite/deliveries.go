package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"inbox/inbox"
	"inbox/sqlrow"
)

// The (row, destination) pairs of the queue: what each destination still
// has to take, in the deliveries table, routed, mirrored onto the rows and
// paused by the statements here.

// unroutedSQL reads up to ?1 new rows not yet routed (next_attempt_at 0),
// oldest first; the events_queue index serves it.
const unroutedSQL = `SELECT id, source, coalesce(event, '') FROM events
		WHERE status = 'new' AND next_attempt_at = 0 ORDER BY received_at LIMIT ?1`

// Unrouted returns up to max new rows not yet routed, oldest first.
func (t queueTx) Unrouted(max int) ([]inbox.Unrouted, error) {
	rows, err := t.st.query(stmtUnrouted, max)
	if err != nil {
		return nil, fmt.Errorf("read the rows to route: %w", err)
	}
	defer rows.Close()
	var out []inbox.Unrouted
	for rows.Next() {
		var u inbox.Unrouted
		if err := rows.Scan(&u.ID, &u.Source, &u.Event); err != nil {
			return nil, fmt.Errorf("read the rows to route: %w", err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the rows to route: %w", err)
	}
	return out, nil
}

// addPairsSQL adds the pairs ?2 lists (a JSON array of [id, destination]),
// due at ?1; a parked or dismissed pair becomes new again. WHERE true: an INSERT ...
// SELECT takes ON CONFLICT only after a WHERE, which tells it from a
// join's ON.
const addPairsSQL = `INSERT INTO deliveries (event_id, destination, status, next_attempt_at, received_at, updated_at)
		SELECT v.id, v.dest, 'new', max(?1, 1), e.received_at, ?1
		FROM (SELECT value ->> 0 AS id, value ->> 1 AS dest FROM json_each(?2)) AS v
		JOIN events e ON e.id = v.id WHERE true
		ON CONFLICT (event_id, destination) DO UPDATE SET status = 'new', reason = NULL, attempts = 0,
			next_attempt_at = excluded.next_attempt_at, lease_owner = NULL, lease_until = NULL,
			last_error = NULL, done_at = NULL, updated_at = excluded.updated_at
		WHERE deliveries.status = 'parked' OR deliveries.status = 'dismissed'`

// AddPairs adds pairs, due at now; a parked or dismissed pair becomes new
// again. It
// writes one statement per maxDoneBatch pairs.
func (t queueTx) AddPairs(pairs []inbox.Pair, now time.Time) error {
	for from := 0; from < len(pairs); from += maxDoneBatch {
		batch := pairs[from:min(from+maxDoneBatch, len(pairs))]
		if _, err := t.st.exec(stmtAddPairs, millis(now), pairList(batch)); err != nil {
			return fmt.Errorf("route %d pairs: %w", len(batch), err)
		}
	}
	return nil
}

// mirrorSQL sets the queue columns of the new rows ?1 lists (a JSON array
// of ids) from their pairs, a row with no pair done at ?2. Each row's pairs
// are read by its id alone (the deliveries key's prefix), with no grouping
// or sorting across the rows (nor, for a row with one pair, to find its
// last error), and +status keeps the planner off the queue index, which
// would have it walk every new row.
const mirrorSQL = `UPDATE events SET (status, reason, attempts, next_attempt_at, lease_owner, lease_until,
			last_error, done_at, updated_at) = (SELECT
		CASE WHEN max(d.status = 'new') THEN 'new' WHEN max(d.status = 'parked') THEN 'parked' ELSE 'done' END,
		CASE WHEN NOT max(d.status = 'new') AND max(d.status = 'parked') THEN max(CASE WHEN d.status = 'parked' THEN d.reason END) END,
		coalesce(max(d.attempts), events.attempts),
		coalesce(min(CASE WHEN d.status = 'new' THEN d.next_attempt_at END), 0),
		max(CASE WHEN d.status = 'new' THEN d.lease_owner END),
		max(CASE WHEN d.status = 'new' THEN d.lease_until END),
		coalesce(CASE WHEN count(*) = 1 THEN max(d.last_error) ELSE (SELECT l.last_error FROM deliveries l
			WHERE l.event_id = events.id AND l.last_error IS NOT NULL ORDER BY l.updated_at DESC LIMIT 1) END,
			events.last_error),
		CASE WHEN NOT max(d.status = 'new') AND NOT max(d.status = 'parked') THEN coalesce(max(d.done_at), ?2)
			WHEN count(*) = 0 THEN ?2 END,
		CASE WHEN count(*) = 0 THEN ?2
			WHEN max(d.status = 'new') THEN events.updated_at
			ELSE max(d.updated_at) END
		FROM deliveries d WHERE d.event_id = events.id)
	WHERE id IN (SELECT value FROM json_each(?1)) AND +status = 'new'`

// Mirror sets the queue columns of the new rows of ids from their pairs, in
// one statement.
func (t queueTx) Mirror(ids []string, now time.Time) error {
	b, err := json.Marshal(ids)
	if err != nil {
		return fmt.Errorf("mirror %d rows: %w", len(ids), err)
	}
	if _, err := t.st.exec(stmtMirror, string(b), millis(now)); err != nil {
		return fmt.Errorf("mirror %d rows: %w", len(ids), err)
	}
	return nil
}

// Deliveries returns where the row id stands with each destination it was
// routed to, by destination; none for a row not routed.
func (s *Store) Deliveries(ctx context.Context, id string) ([]inbox.Pairing, error) {
	out, err := sqlrow.Collect(ctx, s.query, `SELECT `+sqlrow.PairingColumns+`
		FROM deliveries WHERE event_id = ? ORDER BY destination`, []any{id}, sqlrow.ScanPairing)
	if err != nil {
		return nil, fmt.Errorf("read the destinations of %s: %w", id, err)
	}
	return inbox.WithEarlier(id, out, func() (map[string][]inbox.Series, error) { return s.history(ctx, id) })
}

// Destinations counts each destination's pairs by status at now, paused
// destinations with no pair included, by name.
func (s *Store) Destinations(ctx context.Context, now time.Time) ([]inbox.DestinationStats, error) {
	return sqlrow.Destinations(ctx, s.query, `SELECT destination, status, count(*),
			coalesce(sum(status = 'new' AND lease_owner IS NOT NULL AND lease_until > ?1), 0),
			coalesce(sum(status = 'new' AND attempts > 0 AND next_attempt_at > ?1 AND lease_owner IS NULL), 0)
		FROM deliveries GROUP BY destination, status`, []any{millis(now)})
}

// PausedDestinations returns the destinations an operator paused, by name.
func (s *Store) PausedDestinations(ctx context.Context) ([]string, error) {
	return sqlrow.Paused(ctx, s.query)
}

// SetPaused pauses (or resumes) the destination name, for every dispatcher
// on the store.
func (s *Store) SetPaused(ctx context.Context, name string, paused bool) error {
	return s.writeOp(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		if paused {
			_, err = tx.ExecContext(ctx, `INSERT INTO paused_destinations (name, paused_at) VALUES (?, ?)
				ON CONFLICT (name) DO NOTHING`, name, millis(time.Now()))
		} else {
			_, err = tx.ExecContext(ctx, `DELETE FROM paused_destinations WHERE name = ?`, name)
		}
		if err != nil {
			return fmt.Errorf("pause %s: %w", name, err)
		}
		return nil
	})
}

// DownDestinations returns the destinations a dispatcher found down, by
// name.
func (s *Store) DownDestinations(ctx context.Context) ([]inbox.DownDestination, error) {
	return sqlrow.Down(ctx, s.query)
}

// SetDown records the destination name down since since, for cause, or
// up (a zero since).
func (s *Store) SetDown(ctx context.Context, name string, since time.Time, cause string) error {
	return s.writeOp(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		if since.IsZero() {
			_, err = tx.ExecContext(ctx, `DELETE FROM down_destinations WHERE name = ?`, name)
		} else {
			_, err = tx.ExecContext(ctx, `INSERT INTO down_destinations (name, since, cause) VALUES (?, ?, ?)
				ON CONFLICT (name) DO UPDATE SET since = excluded.since, cause = excluded.cause`, name, millis(since), cause)
		}
		if err != nil {
			return fmt.Errorf("record destination %s down: %w", name, err)
		}
		return nil
	})
}

// RecordRouting records (or, routes nil, forgets) the routing of the
// dispatcher owner.
func (s *Store) RecordRouting(ctx context.Context, owner string, routes []inbox.Route, now time.Time) error {
	if s.write == nil {
		return errors.New("record the routing: store is read-only")
	}
	// Bookkeeping, as the probe is: not a commit readiness counts, so that
	// a small write every few seconds never ends a doubt a delivery's
	// failed commit raised (see health.Commits).
	return s.send(ctx, &write{Probe: true, Op: task{op: func(ctx context.Context, tx *sql.Tx) error {
		var err error
		if routes == nil {
			_, err = tx.ExecContext(ctx, `DELETE FROM routings WHERE owner = ?`, owner)
		} else {
			_, err = tx.ExecContext(ctx, `INSERT INTO routings (owner, routes, seen_at) VALUES (?, ?, ?)
				ON CONFLICT (owner) DO UPDATE SET routes = excluded.routes, seen_at = excluded.seen_at`,
				owner, inbox.EncodeRoutes(routes), millis(now))
		}
		if err != nil {
			return fmt.Errorf("record the routing: %w", err)
		}
		return nil
	}}}, false).Err
}

// Routings returns the routings recorded at or after since, by owner.
func (s *Store) Routings(ctx context.Context, since time.Time) ([]inbox.Routing, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT owner, routes, seen_at FROM routings WHERE seen_at >= ? ORDER BY owner`, millis(since))
	if err != nil {
		return nil, fmt.Errorf("read the routings: %w", err)
	}
	defer rows.Close()
	var out []inbox.Routing
	for rows.Next() {
		var owner, routes string
		var seen int64
		if err := rows.Scan(&owner, &routes, &seen); err != nil {
			return nil, fmt.Errorf("read the routings: %w", err)
		}
		r, err := inbox.ReadRouting(owner, routes, seen)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// pairList is pairs as the JSON array of [id, destination] the statements
// that take pairs read through json_each.
func pairList(pairs []inbox.Pair) string {
	list := make([][2]string, len(pairs))
	for i, p := range pairs {
		list[i] = [2]string{p.ID, p.Destination}
	}
	b, _ := json.Marshal(list) // strings: cannot fail
	return string(b)
}
