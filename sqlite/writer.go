package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"inbox/inbox"
)

type putRequest struct {
	d inbox.Delivery
	// op, when set, is run instead of storing d (see Store.writeOp).
	op func(context.Context, *sql.Tx) error
	// probe marks Ping's op, which OnCommit does not count.
	probe bool
	// deadline is when the request's wait for another process's lock
	// ends: the busy timeout after it was sent.
	deadline time.Time
	done     chan putResult // buffered: the writer never blocks on a caller
}

type putResult struct {
	res inbox.Result
	err error
}

// Put stores one classified delivery and returns once the transaction that
// holds it has committed (with synchronous FULL, once the WAL is fsynced).
// Deliveries that arrive while a commit is in progress are committed
// together in the next one. Any failure to commit is returned as an error
// and nothing of the delivery is kept; ErrClosed after Close.
func (s *Store) Put(ctx context.Context, d inbox.Delivery) (inbox.Result, error) {
	if s.write == nil {
		return inbox.Result{}, errors.New("put: store is read-only")
	}
	// The delivery may commit after ctx is done; the sender retries and the
	// repeat is counted on the row.
	r := s.send(ctx, &putRequest{d: d, done: make(chan putResult, 1)})
	return r.res, r.err
}

// writeOp runs op in the writer's next transaction, beside the deliveries and
// other writes waiting then, and returns once that transaction has
// committed. op runs in a savepoint: when it fails, its changes alone are
// rolled back and its error returned, and the rest of the batch commits.
// When the commit fails, op's changes are gone, whatever op returned. The
// dispatcher's writes go through here so that, inside serve, the store
// keeps one write connection and shares commits with the receiver.
func (s *Store) writeOp(ctx context.Context, op func(context.Context, *sql.Tx) error) error {
	if s.write == nil {
		return errors.New("store is read-only")
	}
	return s.send(ctx, &putRequest{op: op, done: make(chan putResult, 1)}).err
}

// send hands req to the writer and waits for its result. The busy timeout
// counts from here: a request that waits for the writer while the writer
// waits for another process's lock gives up when its own time is up, not
// after the writer's wait and then one of its own.
func (s *Store) send(ctx context.Context, req *putRequest) putResult {
	req.deadline = time.Now().Add(s.busy)
	waiting := time.NewTimer(s.busy)
	defer waiting.Stop()
	select {
	case s.reqs <- req:
	case <-s.closing:
		return putResult{err: inbox.ErrClosed}
	case <-ctx.Done():
		return putResult{err: ctx.Err()}
	case <-waiting.C:
		return putResult{err: fmt.Errorf("%w: waited %s for the writer, which waits for it too", errLocked, s.busy)}
	}
	// Taken by the writer: its lock wait ends at req.deadline, and its
	// commit should follow at once. A commit that hangs (an fsync stuck on
	// a failing disk) must not hold the caller past the busy timeout's
	// promise: the answer is then an error, although the commit may still
	// land later (the sender's retry is a counted repeat).
	hung := time.NewTimer(time.Until(req.deadline) + commitGrace)
	defer hung.Stop()
	select {
	case r := <-req.done:
		return r
	case <-ctx.Done():
		return putResult{err: ctx.Err()}
	case <-hung.C:
		return putResult{err: fmt.Errorf("the commit has not returned %s after the busy timeout: still running", commitGrace)}
	}
}

// commitGrace is how long past its busy timeout a request waits for the
// commit that carries it: the receiver's 503 arrives within the busy
// timeout and half a second.
const commitGrace = 400 * time.Millisecond

// runWriter owns the write connection until Close. It takes the first
// waiting delivery, adds whatever else is already waiting (up to maxBatch,
// without waiting for more), and commits them as one transaction. When the
// BEGIN gave up on another process's lock at the batch's earliest
// deadline, the requests whose own deadline is still ahead wait on in the
// next batch rather than fail early.
func (s *Store) runWriter() {
	defer s.stopped.Done()
	batch := make([]*putRequest, 0, s.maxBatch)
	var carried []*putRequest
	for {
		if len(carried) == 0 {
			select {
			case req := <-s.reqs:
				batch = append(batch[:0], req)
			case <-s.closing:
				return
			}
		} else {
			select {
			case <-s.closing:
				for _, req := range carried {
					req.done <- putResult{err: inbox.ErrClosed}
				}
				return
			default:
			}
			batch = append(batch[:0], carried...)
			carried = carried[:0]
		}
	fill:
		for len(batch) < s.maxBatch {
			select {
			case req := <-s.reqs:
				batch = append(batch, req)
			default:
				break fill
			}
		}
		start := time.Now()
		results, err := s.commit(batch)
		if n, largest := counted(batch); s.onCommit != nil && n > 0 {
			s.onCommit(inbox.Commit{N: n, Largest: largest, Took: time.Since(start), Err: err})
		}
		for i, req := range batch {
			switch {
			case err == nil:
				req.done <- results[i]
			case errors.Is(err, errLocked) && time.Until(req.deadline) > minLockWait:
				carried = append(carried, req)
			default:
				req.done <- putResult{err: err}
			}
		}
	}
}

// counted is how many requests of batch OnCommit reports (all but Ping's),
// and the largest body among them.
func counted(batch []*putRequest) (n, largest int) {
	for _, req := range batch {
		if !req.probe {
			n++
			largest = max(largest, len(req.d.Body))
		}
	}
	return n, largest
}

// errLocked is why a write failed when another process held the write lock
// for the whole busy timeout.
var errLocked = errors.New("database is locked")

// minLockWait is how long a BEGIN may wait for the lock even when a
// request's deadline has passed already (it waited for the writer while
// the writer committed): an uncontended BEGIN takes microseconds, and must
// not fail for want of them.
const minLockWait = 10 * time.Millisecond

// begin starts the IMMEDIATE transaction of batch. The wait for another
// process's write lock ends at the earliest deadline of the batch, so no
// request waits longer than the busy timeout in all. done is to be called
// once the transaction has ended.
func (s *Store) begin(batch []*putRequest) (tx *sql.Tx, done func(), err error) {
	deadline := batch[0].deadline
	for _, req := range batch[1:] {
		if req.deadline.Before(deadline) {
			deadline = req.deadline
		}
	}
	// Not the callers' contexts: a request that gives up must not abort the
	// transaction that carries its neighbours. The driver ends the lock
	// wait, and rolls back, when the transaction's context is done, so the
	// deadline cancels it only while BEGIN is still waiting.
	ctx, cancel := context.WithCancel(context.Background())
	timer := time.AfterFunc(max(time.Until(deadline), minLockWait), cancel)
	tx, err = s.write.BeginTx(ctx, nil)
	if !timer.Stop() {
		if err == nil {
			tx.Rollback()
		}
		cancel()
		return nil, nil, fmt.Errorf("begin: %w: another process held the write lock past the busy timeout (%s)", errLocked, s.busy)
	}
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("begin: %w", err)
	}
	return tx, cancel, nil
}

// commit writes a batch in one IMMEDIATE transaction. Any error but an op's
// rolls back the whole batch, which then fails as one: each sender retries.
// A batch that committed while its database file was being removed or
// replaced fails too: its rows are in a file nobody will read.
func (s *Store) commit(batch []*putRequest) ([]putResult, error) {
	ctx := context.Background()
	tx, done, err := s.begin(batch)
	if err != nil {
		return nil, err
	}
	defer done()
	now := millis(s.now())
	st := &txStmts{ctx: ctx, tx: tx, st: s.stmts}
	results := make([]putResult, len(batch))
	for i, req := range batch {
		if req.op != nil {
			if results[i].err, err = runOp(ctx, tx, req.op); err != nil {
				tx.Rollback()
				return nil, err
			}
			continue
		}
		if results[i].res, err = put(ctx, st, req.d, now); err != nil {
			tx.Rollback()
			return nil, err
		}
	}
	// In the same transaction: a stored key is never also missing.
	if err := settleArrivals(ctx, st, batch, now); err != nil {
		tx.Rollback()
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	if err := s.guard.check(); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	return results, nil
}

// runOp runs op inside a savepoint of tx and returns op's error, after
// undoing op's changes; err is set only when the savepoint itself fails.
func runOp(ctx context.Context, tx *sql.Tx, op func(context.Context, *sql.Tx) error) (opErr, err error) {
	if _, err := tx.ExecContext(ctx, `SAVEPOINT op`); err != nil {
		return nil, fmt.Errorf("savepoint: %w", err)
	}
	if opErr = op(ctx, tx); opErr != nil {
		if _, err := tx.ExecContext(ctx, `ROLLBACK TO op`); err != nil {
			return nil, fmt.Errorf("roll back to savepoint: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `RELEASE op`); err != nil {
		return nil, fmt.Errorf("release savepoint: %w", err)
	}
	return opErr, nil
}

const insertSQL = `INSERT INTO events
	(id, job_id, status, reason, event, job_status, result_url, body, size, sha256,
	 delivery_ts, received_at, deliveries, last_seen_at, updated_at, source, response)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?)
	ON CONFLICT(id) DO NOTHING`

// put applies one delivery inside st's transaction, through its prepared
// statements only: a repeat parses no more SQL than a new row. The primary
// key decides whether the row is new: insert, and only when the key is
// taken look at what holds it.
func put(ctx context.Context, st *txStmts, d inbox.Delivery, now int64) (inbox.Result, error) {
	ins := st.get(stmtInsert)
	inserted, err := insert(ctx, ins, d, now)
	if err != nil {
		return inbox.Result{}, err
	}
	if inserted {
		return inbox.Fresh(d), nil
	}

	cur, err := scanCurrent(d.Key, st.get(stmtCurrent).QueryRowContext(ctx, d.Key))
	if err != nil {
		return inbox.Result{}, fmt.Errorf("read %s: %w", d.Key, err)
	}
	switch inbox.Land(cur, d) {
	case inbox.LandRevive:
		if err := revive(ctx, st.get(stmtRevive), d, 1, now, now); err != nil {
			return inbox.Result{}, err
		}
		if cur.Response == nil {
			cur.Response = d.Response
		}
		return inbox.Result{Outcome: inbox.OutcomeRevived, ID: d.Key, Response: cur.Response}, nil
	case inbox.LandRepeat:
		res, err := repeat(ctx, st.get(stmtRepeat), d.Key, 1, now)
		res.Response = cur.Response
		return res, err
	}

	// The job's row holds something else: park this delivery beside it,
	// keyed by its bytes, so it is never silently dropped.
	beside := inbox.Beside(d)
	if inserted, err = insert(ctx, ins, beside, now); err != nil {
		return inbox.Result{}, err
	}
	if !inserted {
		// The same bytes again: their row's saved answer is the delivery's.
		res, err := repeat(ctx, st.get(stmtRepeat), beside.Key, 1, now)
		res.Response = beside.Response
		return res, err
	}
	return inbox.Fresh(beside), nil
}

func insert(ctx context.Context, ins *sql.Stmt, d inbox.Delivery, now int64) (bool, error) {
	res, err := ins.ExecContext(ctx,
		d.Key, nullable(d.JobID), string(d.Status), nullable(string(d.Reason)),
		nullable(d.Event), nullable(d.JobStatus), nullable(d.ResultURL),
		d.Body, len(d.Body), d.SHA256, d.DeliveryTS, now, now, now, inbox.SourceOf(d), d.Response)
	if err != nil {
		return false, fmt.Errorf("insert %s: %w", d.Key, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("insert %s: %w", d.Key, err)
	}
	return n == 1, nil
}

// execer runs a statement: a *sql.Stmt prepared for it, or a *sql.Tx
// given the statement's text (reprocess, which is rare).
type execer interface {
	ExecContext(ctx context.Context, args ...any) (sql.Result, error)
}

// textExec runs q on tx from its text, as an execer.
type textExec struct {
	tx *sql.Tx
	q  string
}

func (t textExec) ExecContext(ctx context.Context, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(ctx, t.q, args...)
}

// repeat counts n deliveries, the last seen at lastSeen, on the row that
// already holds them; upd is repeatSQL, prepared or not.
func repeat(ctx context.Context, upd execer, id string, n, lastSeen int64) (inbox.Result, error) {
	_, err := upd.ExecContext(ctx, n, lastSeen, id)
	if err != nil {
		return inbox.Result{}, fmt.Errorf("count repeat of %s: %w", id, err)
	}
	return inbox.Result{Outcome: inbox.OutcomeDuplicate, ID: id}, nil
}

// nullable maps "" to SQL NULL.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}
