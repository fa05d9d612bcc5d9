package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"inbox/inbox"
	"inbox/sqlrow"
)

// How a batch of deliveries lands on the rows under the landing rules
// (inbox.Land), in the writer's transaction (writer.go).

// keyState is one key of a batch while it lands: the row that holds it as
// the transaction sees it, and what the batch does to it.
type keyState struct {
	row      inbox.Event // Status, Reason, SHA256, Event, JobStatus, Source, Response
	inserted bool        // the batch's first delivery of the key made the row
	first    int         // that delivery's index in the batch
	extra    int64       // further deliveries counted on the row
	revive   *inbox.Delivery
}

// land begins the writer's transaction on c and applies the batch in it,
// with the landing rules of the SQLite store, and returns each delivery's
// result, the transaction's clock and its id (for commitOutcome). What
// needs no answer before COMMIT (the counted repeats, the revivals, the
// settled arrivals) it queues in last, which is sent with COMMIT.
//
// Deliveries are taken by key, each key once and in key order, so two
// batches (this process's other writers', another replica's) lock rows in
// the same order. Two statements, sent with BEGIN, insert the new keys
// (unnest, ON CONFLICT (id) DO NOTHING), then lock (FOR UPDATE) and read
// the rows that already held the others; a key they did neither to (its
// row held by another session) is looked at by a statement of its own.
// A row another session holds is not waited for: its deliveries are left
// out, marked in held (by index in batch), and the rest land. Then each
// delivery lands, in the order it came, on its row as the deliveries
// before it left it; those parked beside get a second round of inserts.
func (s *Store) land(ctx context.Context, c *pgx.Conn, batch []inbox.Delivery, last *tail) (results []inbox.Result, held []bool, tx txStart, err error) {
	// A source with expected_only stores a job only if it is expected:
	// that is read first, in the transaction, before anything lands.
	begun := slices.ContainsFunc(batch, inbox.Delivery.NeedsExpectation)
	if begun {
		if batch, err = parkUnexpected(ctx, c, batch); err != nil {
			return nil, nil, txStart{}, err
		}
	}
	results, held = make([]inbox.Result, len(batch)), make([]bool, len(batch))
	keys := make(map[string]*keyState, len(batch))
	// One allocation for the keys' states: states never grows past its
	// capacity, so the pointers into it hold.
	states := make([]keyState, 0, len(batch))
	firsts := make([]int, 0, len(batch))
	for i, d := range batch {
		if _, ok := keys[d.Key]; !ok {
			states = append(states, keyState{first: i, row: rowOf(d)})
			keys[d.Key] = &states[len(states)-1]
			firsts = append(firsts, i)
		}
	}
	found := make(map[string]bool, len(firsts)) // the keys the first round trip inserted or locked
	if tx, err = s.begin(ctx, c, batch, firsts, keys, found, begun); err != nil {
		return nil, nil, txStart{}, err
	}
	now := tx.now
	var rest []string // keys neither inserted nor locked
	for key := range keys {
		if !found[key] {
			rest = append(rest, key)
		}
	}
	heldKeys, err := lockRows(ctx, c, rest, keys)
	if err != nil {
		return nil, nil, txStart{}, err
	}
	var landing []inbox.Delivery // the deliveries whose rows the batch holds
	for i, d := range batch {
		if heldKeys[d.Key] {
			held[i] = true
			continue
		}
		landing = append(landing, d)
	}

	// beside are the deliveries parked beside their key's row, re-keyed.
	type besideDelivery struct {
		i int
		d inbox.Delivery
	}
	var beside []besideDelivery
	for i, d := range batch {
		if held[i] {
			continue
		}
		k := keys[d.Key]
		if k.inserted && k.first == i {
			results[i] = inbox.Fresh(d)
			continue
		}
		switch inbox.Land(k.row, d) {
		case inbox.LandRevive:
			resp := k.row.Response
			if resp == nil {
				resp = d.Response
			}
			k.revive, k.extra = &d, k.extra+1
			k.row = rowOf(d)
			k.row.Status, k.row.Reason, k.row.Response = inbox.StatusNew, "", resp
			results[i] = inbox.Result{Outcome: inbox.OutcomeRevived, ID: d.Key, Response: resp}
		case inbox.LandRepeat:
			k.extra++
			results[i] = inbox.Result{Outcome: inbox.OutcomeDuplicate, ID: d.Key, Response: k.row.Response}
		default:
			beside = append(beside, besideDelivery{i, inbox.Beside(d)})
		}
	}

	// Second round: rows kept beside a job's row, keyed by their bytes. A
	// key already taken holds the same bytes: the delivery is counted on it.
	if len(beside) > 0 {
		var secondFirsts []int
		second := map[string]*keyState{}
		besideBatch := make([]inbox.Delivery, len(batch))
		for _, b := range beside {
			besideBatch[b.i] = b.d
			if _, ok := keys[b.d.Key]; ok {
				continue
			}
			if _, ok := second[b.d.Key]; !ok {
				second[b.d.Key] = &keyState{first: b.i}
				secondFirsts = append(secondFirsts, b.i)
			}
		}
		inserted, err := insert(ctx, c, besideBatch, secondFirsts, now)
		if err != nil {
			return nil, nil, txStart{}, err
		}
		var taken []string
		for key, k := range second {
			if k.inserted = inserted[key]; !k.inserted {
				taken = append(taken, key)
			}
			keys[key] = k
		}
		// Locked now, so the count queued for COMMIT finds them.
		if err := lockTaken(ctx, c, taken); err != nil {
			return nil, nil, txStart{}, err
		}
		for _, b := range beside {
			k := keys[b.d.Key]
			if k.inserted && k.first == b.i {
				results[b.i] = inbox.Fresh(b.d)
				continue
			}
			k.extra++
			// The same bytes again: their row's saved answer is the delivery's.
			results[b.i] = inbox.Result{Outcome: inbox.OutcomeDuplicate, ID: b.d.Key, Response: b.d.Response}
		}
	}

	countRepeats(last, keys, now)
	// In the same transaction: a stored key is never also missing.
	if len(landing) > 0 {
		settleArrivals(last, landing, now)
	}
	return results, held, tx, nil
}

// parkUnexpected begins the writer's transaction on c, reads which of the
// jobs of batch that need an expectation (inbox.Delivery.NeedsExpectation)
// have one, and returns a copy of batch in which the others are
// inbox.Unexpected.
func parkUnexpected(ctx context.Context, c *pgx.Conn, batch []inbox.Delivery) ([]inbox.Delivery, error) {
	var sources, jobs []string
	for _, d := range batch {
		if d.NeedsExpectation() {
			sources, jobs = append(sources, inbox.SourceOf(d)), append(jobs, d.JobID)
		}
	}
	expected := make(map[[2]string]bool, len(jobs))
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(`SELECT x.source, x.job_id FROM expectations x
		JOIN unnest($1::text[], $2::text[]) AS u(source, job_id) ON x.source = u.source AND x.job_id = u.job_id`,
		sources, jobs).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var k [2]string
			if err := rows.Scan(&k[0], &k[1]); err != nil {
				return err
			}
			expected[k] = true
		}
		return rows.Err()
	})
	if err := c.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("look for the expectations of %d jobs: %w", len(jobs), err)
	}
	out := slices.Clone(batch)
	for i, d := range out {
		if d.NeedsExpectation() && !expected[[2]string{inbox.SourceOf(d), d.JobID}] {
			out[i] = inbox.Unexpected(d)
		}
	}
	return out, nil
}

// txStart is what the writer's transaction learns as it begins: its clock
// (Unix milliseconds) and its id.
type txStart struct {
	now int64
	xid int64
}

// begin sends BEGIN, the batch's insert (insertPlain) and the lock and
// read of the rows that already held its other keys (lockExisting) on the
// deliveries of batch at the indexes firsts (one a key), in one round
// trip, and returns the transaction's clock and id. It marks in keys the
// keys it inserted, reads into keys the rows it locked, and records both
// in found. With no deliveries it reads only the clock and the id. With
// begun (parkUnexpected sent BEGIN) it sends no BEGIN of its own.
//
// The insert runs on a plan the server made once for the connection
// (force_generic_plan): it reads no table but through the primary key's
// conflict check, so no plan it could make scans events, and planning it
// afresh for each batch's arguments (the bodies among them) cost the
// server more than running it. Every other statement of the transaction
// is planned for its own arguments and the tables as they are now
// (force_custom_plan): a generic plan made while events was small (the
// server makes one after five runs of a statement, and keeps it) scans
// the whole table for the batch's keys once it is large.
func (s *Store) begin(ctx context.Context, c *pgx.Conn, batch []inbox.Delivery, firsts []int, keys map[string]*keyState, found map[string]bool, begun bool) (txStart, error) {
	clock := s.clockArg()
	b := &pgx.Batch{}
	if !begun {
		b.Queue(`BEGIN`)
	}
	if len(firsts) > 0 {
		args, ids := insertArgs(batch, firsts, clock)
		b.Queue(`SET LOCAL plan_cache_mode = force_generic_plan`)
		b.Queue(insertPlain, args...).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					return err
				}
				keys[id].inserted, found[id] = true, true
			}
			return rows.Err()
		})
		b.Queue(`SET LOCAL plan_cache_mode = force_custom_plan`)
		b.Queue(lockExisting, ids).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				r, err := sqlrow.Current.Row(rows.Scan, true)
				if err != nil {
					return err
				}
				keys[r.ID].row, found[r.ID] = r, true
			}
			return rows.Err()
		})
	} else {
		b.Queue(`SET LOCAL plan_cache_mode = force_custom_plan`)
	}
	var tx txStart
	b.Queue(`SELECT coalesce($1::bigint, `+dbNow+`), txid_current()`, clock).QueryRow(func(row pgx.Row) error {
		return row.Scan(&tx.now, &tx.xid)
	})
	if err := c.SendBatch(ctx, b).Close(); err != nil {
		return txStart{}, fmt.Errorf("insert and lock %d rows: %w", len(firsts), err)
	}
	return tx, nil
}

// rowOf is the row a delivery makes, as landing reads it.
func rowOf(d inbox.Delivery) inbox.Event {
	return inbox.Event{Status: d.Status, Reason: d.Reason, SHA256: d.SHA256, Event: d.Event,
		JobStatus: d.JobStatus, Source: inbox.SourceOf(d), Response: d.Response}
}

// lockExisting locks, in key order, and reads the rows that held the keys
// ($1, sorted) before the transaction's insert: those it did not make
// (their xmin is not the transaction's id, the low 32 bits of
// txid_current: PostgreSQL 12 has no xid8), which the insert just before
// it locked already. A row another session holds is skipped; so is an old
// frozen row whose xmin merely matches: land locks what is left by a
// statement of its own (lockRows, which tells a held row from a gone
// one). It runs after the insert, so it sees a row another transaction
// committed while the insert waited for it.
var lockExisting = `SELECT ` + sqlrow.Current.List(true) + `
		FROM events WHERE id = ANY($1) AND xmin::text::bigint <> txid_current() % 4294967296
		ORDER BY id FOR UPDATE SKIP LOCKED`

// insert inserts, in key order in one statement, the deliveries of batch at
// the indexes idx, and returns the keys it inserted: those not already
// taken.
func insert(ctx context.Context, q querier, batch []inbox.Delivery, idx []int, now int64) (map[string]bool, error) {
	if len(idx) == 0 {
		return nil, nil
	}
	args, _ := insertArgs(batch, idx, now)
	rows, err := q.Query(ctx, insertPlain, args...)
	if err != nil {
		return nil, fmt.Errorf("insert %d rows: %w", len(idx), err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("insert %d rows: %w", len(idx), err)
	}
	inserted := make(map[string]bool, len(got))
	for _, id := range got {
		inserted[id] = true
	}
	return inserted, nil
}

// lockRows locks, in key order, and reads the rows at ids, which the
// batch's insert found taken, into keys. It does not wait for a row
// another session holds (SKIP LOCKED): it returns those keys in held. A
// row gone meanwhile (purged) makes the batch run again.
func lockRows(ctx context.Context, tx querier, ids []string, keys map[string]*keyState) (held map[string]bool, err error) {
	if len(ids) == 0 {
		return nil, nil
	}
	slices.Sort(ids)
	rows, err := tx.Query(ctx, `SELECT `+sqlrow.Current.List(true)+`
		FROM events WHERE id = ANY($1) ORDER BY id FOR UPDATE SKIP LOCKED`, ids)
	if err != nil {
		return nil, fmt.Errorf("lock %d rows: %w", len(ids), err)
	}
	defer rows.Close()
	locked := make(map[string]bool, len(ids))
	for rows.Next() {
		r, err := sqlrow.Current.Row(rows.Scan, true)
		if err != nil {
			return nil, fmt.Errorf("lock %d rows: %w", len(ids), err)
		}
		keys[r.ID].row = r
		locked[r.ID] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lock %d rows: %w", len(ids), err)
	}
	if len(locked) == len(ids) {
		return nil, nil
	}
	var skipped []string
	for _, id := range ids {
		if !locked[id] {
			skipped = append(skipped, id)
		}
	}
	// Skipped: held by another session, or gone. A plain read tells which.
	rows, err = tx.Query(ctx, `SELECT id FROM events WHERE id = ANY($1)`, skipped)
	if err != nil {
		return nil, fmt.Errorf("read %d held rows: %w", len(skipped), err)
	}
	there, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read %d held rows: %w", len(skipped), err)
	}
	if len(there) != len(skipped) {
		return nil, errRetry
	}
	held = make(map[string]bool, len(there))
	for _, id := range there {
		held[id] = true
	}
	return held, nil
}

// lockTaken locks, in key order, waiting for them, the rows at ids, which
// a beside insert found taken. A row gone meanwhile (purged) makes the
// batch run again.
func lockTaken(ctx context.Context, q querier, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	rows, err := q.Query(ctx, `SELECT id FROM events WHERE id = ANY($1) ORDER BY id FOR UPDATE`, ids)
	if err != nil {
		return fmt.Errorf("lock %d rows: %w", len(ids), err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("lock %d rows: %w", len(ids), err)
	}
	if len(got) != len(ids) {
		return errRetry
	}
	return nil
}

// countRepeats queues in t what the batch did to rows it did not make:
// the revivals, one statement each, and the counted repeats, in one
// statement. Each row is one the transaction has locked, so none is gone
// by the time they run.
func countRepeats(t *tail, keys map[string]*keyState, now int64) {
	var ids []string
	for key, k := range keys {
		if k.revive != nil {
			revive(t, *k.revive, k.extra, now)
			continue
		}
		if k.extra > 0 {
			ids = append(ids, key)
		}
	}
	if len(ids) == 0 {
		return
	}
	slices.Sort(ids)
	counts := make([]int64, len(ids))
	for i, id := range ids {
		counts[i] = keys[id].extra
	}
	t.queue(fmt.Sprintf("count repeats on %d rows", len(ids)), `UPDATE events e SET deliveries = e.deliveries + u.n,
		last_seen_at = greatest(e.last_seen_at, $3)
		FROM unnest($1::text[], $2::bigint[]) AS u(id, n) WHERE e.id = u.id`, ids, counts, now)
}

// revive queues in t the statement that makes the parked row at d.Key new
// with d's body, and counts n deliveries on it. The row is queued afresh:
// no attempts, no lease, no error.
func revive(t *tail, d inbox.Delivery, n, now int64) {
	t.queue("revive "+d.Key, reviveSQL, reviveArgs(d, n, now)...)
}
