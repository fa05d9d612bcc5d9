package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"inbox/inbox"
)

// Ping is Probe with nothing beyond the probe's own rows.
func (s *Store) Ping(ctx context.Context) error { return s.Probe(ctx, 0) }

// Probe reports whether the store can commit now what a delivery of size
// bytes (at most inbox.MaxProbeWrite) and the dispatcher's claim commit: it
// commits a write of its own through the writer, beside the deliveries
// waiting then, so it fails as they do. That transaction inserts a row of
// size bytes into events as a delivery does (the same statement), claims
// it as the dispatcher does, settles it as an arrival in refusals and
// expectations as each batch does, undoes all three (a savepoint), and
// rewrites this store's probe row: so a lock on events, refusals or
// expectations, a revoked INSERT, UPDATE or DELETE on them, a
// disk the server cannot extend the table on, the database unreachable or
// a standby, and the writer stuck behind rows another session holds, all
// fail it. A read-only store only asks the database to answer. It fails
// within the busy timeout, or when ctx is done.
func (s *Store) Probe(ctx context.Context, size int) error {
	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	if s.readOnly {
		if err := s.pool.Ping(ctx); err != nil {
			return fmt.Errorf("ping store: %w", err)
		}
		return nil
	}
	err := s.send(ctx, &write{Probe: true, Op: min(max(size, 0), inbox.MaxProbeWrite)}).Err
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "25006" { // read_only_sql_transaction
		return errors.New("ping store: the database takes no writes (a standby?)")
	}
	if err != nil {
		return fmt.Errorf("ping store: %w", err)
	}
	return nil
}

// probe queues in t, for the writer's transaction, the probe: a row of
// size bytes inserted into events under this store's own key, claimed and
// settled as an arrival, all undone, then this store's probe row. Any
// failure fails the transaction, as a delivery's would.
func (s *Store) probe(t *tail, size int, now int64) {
	t.queue("probe events", `SAVEPOINT probe_row`)
	key := "inbox probe " + s.probeID // no delivery makes a key with a space
	row := []inbox.Delivery{inbox.ProbeRow(key, size)}
	args, _ := insertArgs(row, []int{0}, now)
	t.queue("probe events", insertPlain, args...)
	t.queue("probe events: claim", `UPDATE events SET attempts = attempts + 1, lease_owner = 'probe',
		lease_until = $2, next_attempt_at = $2 WHERE id = $1`, key, now)
	// A batch settles its arrivals in refusals and expectations too: the
	// same statement, on the probe's key as a job's, meets the locks and
	// privileges they need.
	arrival := row[0]
	arrival.JobID = key
	settleArrivals(t, []inbox.Delivery{arrival}, now)
	t.queue("probe events", `ROLLBACK TO SAVEPOINT probe_row`)
	t.queue("write the probe", `INSERT INTO probe (id, at) VALUES ($1, $2)
		ON CONFLICT (id) DO UPDATE SET at = excluded.at`, s.probeID, now)
}
