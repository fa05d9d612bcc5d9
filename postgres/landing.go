package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"inbox/inbox"
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

// land applies the batch inside tx, with the landing rules of the SQLite
// store, and returns each delivery's result. Deliveries are taken by key,
// each key once and in key order, so two replicas' batches lock rows in
// the same order: the inserts (unnest, ON CONFLICT (id) DO NOTHING) first,
// then the rows that already existed, locked (FOR UPDATE) and read by a
// separate statement, which sees another replica's committed row. A row
// another session holds is not waited for: its deliveries are left out,
// marked in held (by index in batch), and the rest land. Then each
// delivery lands, in the order it came, on its row as the deliveries
// before it left it; those parked beside get a second round of inserts.
func (s *Store) land(ctx context.Context, tx pgx.Tx, batch []inbox.Delivery) (results []inbox.Result, held []bool, err error) {
	now, err := s.txNow(ctx, tx)
	if err != nil {
		return nil, nil, err
	}
	results, held = make([]inbox.Result, len(batch)), make([]bool, len(batch))
	keys := map[string]*keyState{}
	var firsts []int
	for i, d := range batch {
		if _, ok := keys[d.Key]; !ok {
			keys[d.Key] = &keyState{first: i, row: rowOf(d)}
			firsts = append(firsts, i)
		}
	}
	inserted, err := insert(ctx, tx, batch, firsts, now)
	if err != nil {
		return nil, nil, err
	}
	var existing []string
	for key, k := range keys {
		if k.inserted = inserted[key]; !k.inserted {
			existing = append(existing, key)
		}
	}
	heldKeys, err := lockRows(ctx, tx, existing, keys)
	if err != nil {
		return nil, nil, err
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
		inserted, err := insert(ctx, tx, besideBatch, secondFirsts, now)
		if err != nil {
			return nil, nil, err
		}
		for key, k := range second {
			k.inserted = inserted[key]
			keys[key] = k
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

	if err := countRepeats(ctx, tx, keys, now); err != nil {
		return nil, nil, err
	}
	// In the same transaction: a stored key is never also missing.
	if len(landing) > 0 {
		if err := settleArrivals(ctx, tx, landing, now); err != nil {
			return nil, nil, err
		}
	}
	return results, held, nil
}

// rowOf is the row a delivery makes, as landing reads it.
func rowOf(d inbox.Delivery) inbox.Event {
	return inbox.Event{Status: d.Status, Reason: d.Reason, SHA256: d.SHA256, Event: d.Event,
		JobStatus: d.JobStatus, Source: inbox.SourceOf(d), Response: d.Response}
}

// insert inserts, in key order in one statement, the deliveries of batch at
// the indexes idx, and returns the keys it inserted: those not already
// taken.
func insert(ctx context.Context, tx pgx.Tx, batch []inbox.Delivery, idx []int, now int64) (map[string]bool, error) {
	if len(idx) == 0 {
		return nil, nil
	}
	idx = slices.Clone(idx)
	slices.SortFunc(idx, func(a, b int) int {
		switch ka, kb := batch[a].Key, batch[b].Key; {
		case ka < kb:
			return -1
		case ka > kb:
			return 1
		}
		return 0
	})
	n := len(idx)
	var (
		ids, jobIDs, statuses, reasons, events = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		jobStatuses, resultURLs, shas, sources = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		bodies, responses                      = make([][]byte, n), make([][]byte, n)
		sizes, deliveryTS                      = make([]int64, n), make([]int64, n)
	)
	for j, i := range idx {
		d := batch[i]
		ids[j], jobIDs[j], statuses[j], reasons[j], events[j] = d.Key, d.JobID, string(d.Status), string(d.Reason), d.Event
		jobStatuses[j], resultURLs[j], shas[j], sources[j] = d.JobStatus, d.ResultURL, d.SHA256, inbox.SourceOf(d)
		bodies[j], responses[j] = d.Body, d.Response
		sizes[j], deliveryTS[j] = int64(len(d.Body)), d.DeliveryTS
	}
	rows, err := tx.Query(ctx, `INSERT INTO events
		(id, job_id, status, reason, event, job_status, result_url, body, size, sha256,
		 delivery_ts, received_at, deliveries, last_seen_at, updated_at, source, response)
		SELECT u.id, NULLIF(u.job_id, ''), u.status, NULLIF(u.reason, ''), NULLIF(u.event, ''),
			NULLIF(u.job_status, ''), NULLIF(u.result_url, ''), u.body, u.size, u.sha256,
			u.delivery_ts, $14, 1, $14, $14, u.source, u.response
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
			$8::bytea[], $9::bigint[], $10::text[], $11::bigint[], $12::text[], $13::bytea[])
			AS u(id, job_id, status, reason, event, job_status, result_url, body, size, sha256, delivery_ts, source, response)
		ORDER BY u.id
		ON CONFLICT (id) DO NOTHING
		RETURNING id`,
		ids, jobIDs, statuses, reasons, events, jobStatuses, resultURLs, bodies, sizes, shas, deliveryTS, sources, responses, now)
	if err != nil {
		return nil, fmt.Errorf("insert %d rows: %w", n, err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("insert %d rows: %w", n, err)
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
func lockRows(ctx context.Context, tx pgx.Tx, ids []string, keys map[string]*keyState) (held map[string]bool, err error) {
	if len(ids) == 0 {
		return nil, nil
	}
	slices.Sort(ids)
	rows, err := tx.Query(ctx, `SELECT id, status, coalesce(reason, ''), sha256, coalesce(event, ''),
		coalesce(job_status, ''), source, response
		FROM events WHERE id = ANY($1) ORDER BY id FOR UPDATE SKIP LOCKED`, ids)
	if err != nil {
		return nil, fmt.Errorf("lock %d rows: %w", len(ids), err)
	}
	defer rows.Close()
	locked := make(map[string]bool, len(ids))
	for rows.Next() {
		var id string
		var r inbox.Event
		if err := rows.Scan(&id, &r.Status, &r.Reason, &r.SHA256, &r.Event, &r.JobStatus, &r.Source, &r.Response); err != nil {
			return nil, fmt.Errorf("lock %d rows: %w", len(ids), err)
		}
		keys[id].row = r
		locked[id] = true
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

// countRepeats writes what the batch did to rows it did not make: the
// revivals, one statement each, and the counted repeats, in one statement.
func countRepeats(ctx context.Context, tx pgx.Tx, keys map[string]*keyState, now int64) error {
	var ids []string
	var counts []int64
	for key, k := range keys {
		if k.revive != nil {
			if err := revive(ctx, tx, *k.revive, k.extra, now); err != nil {
				return err
			}
			continue
		}
		if k.extra > 0 {
			ids = append(ids, key)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	counts = make([]int64, len(ids))
	for i, id := range ids {
		counts[i] = keys[id].extra
	}
	tag, err := tx.Exec(ctx, `UPDATE events e SET deliveries = e.deliveries + u.n,
		last_seen_at = greatest(e.last_seen_at, $3)
		FROM unnest($1::text[], $2::bigint[]) AS u(id, n) WHERE e.id = u.id`, ids, counts, now)
	if err != nil {
		return fmt.Errorf("count repeats on %d rows: %w", len(ids), err)
	}
	if tag.RowsAffected() != int64(len(ids)) {
		return errRetry
	}
	return nil
}

// revive makes the parked row at d.Key new with d's body, and counts n
// deliveries on it. The row is queued afresh: no attempts, no lease, no
// error.
func revive(ctx context.Context, tx pgx.Tx, d inbox.Delivery, n, now int64) error {
	tag, err := tx.Exec(ctx, `UPDATE events SET status = 'new', reason = NULL,
		event = $1, job_status = $2, result_url = NULL, body = $3, size = $4, sha256 = $5,
		delivery_ts = $6, deliveries = deliveries + $7, last_seen_at = greatest(last_seen_at, $8), updated_at = $8,
		attempts = 0, next_attempt_at = 0, lease_owner = NULL, lease_until = NULL,
		last_error = NULL, done_at = NULL, response = coalesce(response, $9)
		WHERE id = $10`,
		nullable(d.Event), nullable(d.JobStatus), d.Body, int64(len(d.Body)), d.SHA256,
		d.DeliveryTS, n, now, d.Response, d.Key)
	if err != nil {
		return fmt.Errorf("revive %s: %w", d.Key, err)
	}
	if tag.RowsAffected() != 1 {
		return errRetry
	}
	return nil
}
