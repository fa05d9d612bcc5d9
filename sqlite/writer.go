package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"
	"sync"
	"time"

	"inbox/inbox"
)

// txOp is a write of the store's own that the writer runs in its next
// transaction (see Store.writeOp).
type txOp func(context.Context, *sql.Tx) error

// task is what a write asks of the writer: its op, or, for a delivery, the
// insert's arguments Put made (insertArgs).
type task struct {
	op   txOp
	args []any
}

// write is one request to the writer: a delivery, or an op.
type write = inbox.Write[task]

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
	// repeat is counted on the row. So neither its hand-off to the writer
	// nor its wait for the commit need end with ctx: they end at the busy
	// timeout and past it, on timers shared with the deliveries sent in the
	// same millisecond (see sharedDeadline).
	r := s.send(ctx, &write{Delivery: d, Op: task{args: insertArgs(d, nil)}}, true)
	return r.Result, r.Err
}

// writeOp runs op in the writer's next transaction, beside the deliveries and
// other writes waiting then, and returns once that transaction has
// committed. op runs in a savepoint: when it fails, its changes alone are
// rolled back and its error returned, and the rest of the batch commits.
// When the commit fails, op's changes are gone, whatever op returned. The
// dispatcher's writes go through here so that, inside serve, the store
// keeps one write connection and shares commits with the receiver.
func (s *Store) writeOp(ctx context.Context, op txOp) error {
	if s.write == nil {
		return errors.New("store is read-only")
	}
	return s.send(ctx, &write{Op: task{op: op}}, false).Err
}

// send hands w to the writer and waits for its result. The busy timeout
// counts from here: a request that waits for the writer while the writer
// waits for another process's lock gives up when its own time is up, not
// after the writer's wait and then one of its own. With shared, neither
// the hand-off nor the wait for the commit ends with ctx, and each ends up
// to a millisecond past its deadline (see sharedDeadline).
func (s *Store) send(ctx context.Context, w *write, shared bool) inbox.Written {
	w.Deadline = time.Now().Add(s.busy)
	// The wait for the commit: the writer's lock wait ends at w.Deadline,
	// and its commit should follow at once. A commit that hangs (an fsync
	// stuck on a failing disk) must not hold the caller past the busy
	// timeout's promise: the answer is then an error, although the commit
	// may still land later (the sender's retry is a counted repeat).
	if shared {
		return s.writer.Send(s.handoffs.until(w.Deadline, s.causes.handoff),
			s.commits.until(w.Deadline.Add(commitGrace), s.causes.commit), w)
	}
	handoff, cancel := context.WithDeadlineCause(ctx, w.Deadline, s.causes.handoff)
	defer cancel()
	wait, cancelWait := context.WithDeadlineCause(ctx, w.Deadline.Add(commitGrace), s.causes.commit)
	defer cancelWait()
	return s.writer.Send(handoff, wait, w)
}

// sharedDeadline makes contexts done at a deadline rounded up to the
// millisecond, one per millisecond, shared by every delivery whose
// deadline falls within it, so that a delivery's hand-off to the writer
// and its wait for the commit cost it no timer of its own.
type sharedDeadline struct {
	mu  sync.Mutex
	at  time.Time       // the deadline of ctx
	ctx context.Context // done at at
	// stop is ctx's cancel. Nothing calls it: deliveries may still be
	// waiting under ctx when the next one is made; its timer ends it.
	stop context.CancelFunc
}

// until returns the shared context done at deadline rounded up to the
// millisecond, with cause.
func (h *sharedDeadline) until(deadline time.Time, cause error) context.Context {
	at := deadline.Truncate(time.Millisecond)
	if at.Before(deadline) {
		at = at.Add(time.Millisecond)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ctx == nil || !h.at.Equal(at) {
		h.ctx, h.stop = context.WithDeadlineCause(context.Background(), at, cause)
		h.at = at
	}
	return h.ctx
}

// sendCauses are why send gives up, made once per store rather than per
// request.
type sendCauses struct {
	handoff error // the writer did not take the request in time
	commit  error // the commit that carries it did not end in time
}

func newSendCauses(busy time.Duration) sendCauses {
	return sendCauses{
		handoff: fmt.Errorf("%w: waited %s, the writer waiting for it too", errLocked, busy),
		commit:  fmt.Errorf("it has not returned %s after the busy timeout: still running", commitGrace),
	}
}

// commitGrace is how long past its busy timeout a request waits for the
// commit that carries it: the receiver's 503 arrives within the busy
// timeout and half a second.
const commitGrace = 400 * time.Millisecond

// newWriter is the store's group commit (inbox.GroupCommit) on the write
// connection, which it owns until Close. When the BEGIN gave up on another
// process's lock at the batch's earliest deadline, the requests whose own
// deadline is still ahead wait on in the next batch rather than fail
// early.
func (s *Store) newWriter() *inbox.GroupCommit[task] {
	return inbox.NewGroupCommit(inbox.GroupCommit[task]{
		MaxBatch: s.maxBatch, Commit: s.commit, OnCommit: s.onCommit, Stop: s.closing,
	})
}

// runWriter runs the group commit until Close.
func (s *Store) runWriter() {
	defer s.stopped.Done()
	s.writer.Run()
}

// errLocked is why a write failed when another process held the write lock
// for the whole busy timeout.
var errLocked = errors.New("database is locked")

// minLockWait is how long a BEGIN may wait for the lock even when a
// request's deadline has passed already (it waited for the writer while
// the writer committed): an uncontended BEGIN takes microseconds, and must
// not fail for want of them.
const minLockWait = 10 * time.Millisecond

// writerCtx is the context of the writer's transactions: commitTx checks
// the files once each has committed, so BeginTx need not (see
// checkedAtCommit).
var writerCtx = context.WithValue(context.Background(), checkedAtCommit{}, true)

// begin starts the IMMEDIATE transaction of batch. The wait for another
// process's write lock ends at the earliest deadline of the batch, so no
// request waits longer than the busy timeout in all. done is to be called
// once the transaction has ended.
func (s *Store) begin(batch []*write) (tx *sql.Tx, done func(), err error) {
	deadline := batch[0].Deadline
	for _, w := range batch[1:] {
		if w.Deadline.Before(deadline) {
			deadline = w.Deadline
		}
	}
	// Not the callers' contexts: a request that gives up must not abort the
	// transaction that carries its neighbours. The driver ends the lock
	// wait, and rolls back, when the transaction's context is done, so the
	// deadline cancels it only while BEGIN is still waiting.
	ctx, cancel := context.WithCancel(writerCtx)
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
// rolls back the whole batch, which then fails as one: each sender retries,
// but for the lock another process held, which the requests whose time is
// not up wait for in a later batch. A batch that committed while its
// database file was being removed or replaced fails too: its rows are in a
// file nobody will read.
func (s *Store) commit(batch []*write) ([]inbox.Written, error) {
	out, err := s.commitTx(batch)
	if lost := s.guard.final(); err != nil && lost != nil && !errors.Is(err, ErrFileLost) {
		// The prepared statements run without the guard's check: one that
		// met the pages written over says "malformed", not why.
		err = lost
	}
	if err != nil {
		out = make([]inbox.Written, len(batch))
		for i, w := range batch {
			out[i] = inbox.Written{Err: err, Again: errors.Is(err, errLocked) && time.Until(w.Deadline) > minLockWait}
		}
	}
	return out, err
}

func (s *Store) commitTx(batch []*write) ([]inbox.Written, error) {
	ctx := context.Background()
	tx, done, err := s.begin(batch)
	if err != nil {
		return nil, err
	}
	defer done()
	now := millis(s.now())
	nowArg := any(now) // boxed once for the batch's rows
	st := &txStmts{ctx: ctx, tx: tx, st: s.stmts}
	results := make([]inbox.Written, len(batch))
	for i, w := range batch {
		if w.Op.op != nil {
			if results[i].Err, err = runOp(st, w.Op.op); err != nil {
				tx.Rollback()
				return nil, err
			}
			continue
		}
		setNow(w.Op.args, nowArg)
		if results[i].Result, err = put(ctx, st, w.Delivery, w.Op.args, now); err != nil {
			tx.Rollback()
			return nil, err
		}
	}
	// In the same transaction: a stored key is never also missing.
	if err := settleArrivals(ctx, st, batchDeliveries(batch), now); err != nil {
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

// batchDeliveries yields the deliveries of batch, leaving its ops out.
func batchDeliveries(batch []*write) iter.Seq[inbox.Delivery] {
	return func(yield func(inbox.Delivery) bool) {
		for _, w := range batch {
			if w.Op.op == nil && !yield(w.Delivery) {
				return
			}
		}
	}
}

// runOp runs op inside a savepoint of st's transaction and returns op's
// error, after undoing op's changes; err is set only when the savepoint
// itself fails.
func runOp(st *txStmts, op txOp) (opErr, err error) {
	if _, err := st.exec(stmtSavepoint); err != nil {
		return nil, fmt.Errorf("savepoint: %w", err)
	}
	if opErr = op(st.ctx, st.tx); opErr != nil {
		if _, err := st.exec(stmtRollbackTo); err != nil {
			return nil, fmt.Errorf("roll back to savepoint: %w", err)
		}
	}
	if _, err := st.exec(stmtRelease); err != nil {
		return nil, fmt.Errorf("release savepoint: %w", err)
	}
	return opErr, nil
}
