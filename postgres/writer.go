package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"inbox/inbox"
)

// write is one request to the writer: a delivery, or the readiness
// probe (Probe set), whose Op is the bytes it writes (see Probe).
type write = inbox.Write[int]

// Put stores one classified delivery and returns once the transaction that
// holds it has committed. Deliveries that arrive while a commit is in
// progress are committed together in the next one. It fails, within the
// busy timeout, when the database cannot be reached or its row stays held
// by another session; nothing of the delivery is then kept, unless the
// connection broke during COMMIT and the server could not be asked within
// the busy timeout whether it committed (the sender's retry is then
// counted as a repeat). A row held by another session fails only the
// deliveries for that row: the rest of the batch commits without them.
// ErrClosed after Close.
//
// Text columns (event, job_status, result_url, job_id) hold what PostgreSQL's
// text takes: a NUL or a byte that is not UTF-8 in them becomes U+FFFD.
// The body and the saved response are kept byte for byte.
func (s *Store) Put(ctx context.Context, d inbox.Delivery) (inbox.Result, error) {
	if s.readOnly {
		return inbox.Result{}, errors.New("put: store is read-only")
	}
	d.JobID, d.Event, d.JobStatus, d.ResultURL = pgText(d.JobID), pgText(d.Event), pgText(d.JobStatus), pgText(d.ResultURL)
	if d.Body == nil {
		d.Body = []byte{}
	}
	// The delivery may commit after ctx is done; the sender retries and the
	// repeat is counted on the row.
	r := s.send(ctx, &write{Delivery: d})
	if r.Err != nil && !errors.Is(r.Err, inbox.ErrClosed) {
		return inbox.Result{}, fmt.Errorf("put %s: %w", d.Key, r.Err)
	}
	return r.Result, r.Err
}

// send hands w to the writer and waits, within the busy timeout, for its
// result: w's deadline.
func (s *Store) send(ctx context.Context, w *write) inbox.Written {
	ctx, cancel := context.WithTimeout(ctx, s.busy)
	defer cancel()
	w.Deadline, _ = ctx.Deadline()
	return s.writer.Send(ctx, ctx, w)
}

// maxBatchBytes bounds the bodies one group commit carries, so a burst of
// large bodies makes several inserts the server takes in well under the
// busy timeout rather than one it may not.
const maxBatchBytes = 16 << 20

// minFill is how many deliveries a writer's batch waits for, fillWait at
// most, while another writer's commit is under way
// (inbox.GroupCommit.MinFill): a commit of one delivery costs the server
// a WAL flush as one of many does.
const (
	minFill  = 8
	fillWait = 2 * time.Millisecond
)

// turnWait is how long a writer waits for its turn to begin a batch
// (inbox.GroupCommit.TurnWait) while another's inserts are slow: several
// times what a batch's first round trip takes on a server that keeps up.
const turnWait = 10 * time.Millisecond

// heldRetry is how soon deliveries whose rows another session held are
// tried again when no new delivery comes first.
const heldRetry = 20 * time.Millisecond

// newWriter is the store's group commit (inbox.GroupCommit), up to
// maxBatch deliveries and maxBatchBytes of bodies a commit, run by
// s.writers loops at once. The loops take their batches in turn
// (GroupCommit.CommitTurn): the next batch begins, on a connection of its
// own, once this one's inserts and locks are answered, while its COMMIT
// waits for the server's flush; a writer whose turn is turnWait late
// begins without it. Deliveries whose rows another session held lead
// their loop's next batch, until their callers' deadlines.
func (s *Store) newWriter() *inbox.GroupCommit[int] {
	return inbox.NewGroupCommit(inbox.GroupCommit[int]{
		MaxBatch: s.maxBatch, MaxBytes: maxBatchBytes, Retry: heldRetry,
		MinFill: minFill, FillWait: fillWait,
		CommitTurn: s.commit, TurnWait: turnWait, OnCommit: s.onCommit, Stop: s.closing,
	})
}

// runWriter runs one of the group commit's loops until Close.
func (s *Store) runWriter() {
	defer s.stopped.Done()
	s.writer.Run()
}

// commit writes a batch as commitTx does, and says what it made of each
// write: a delivery whose row another session holds waits for a later
// batch until its caller's deadline. It calls pass once the batch's rows
// are inserted and locked (the next batch may begin).
func (s *Store) commit(batch []*write, pass func()) ([]inbox.Written, error) {
	results, waiting, err := s.commitTx(batch, pass)
	out := make([]inbox.Written, len(batch))
	for i, w := range batch {
		switch {
		case err != nil:
			out[i].Err = err
		case waiting[i] && time.Now().Before(w.Deadline):
			out[i].Again = true
		case waiting[i]:
			out[i].Err = errors.New("the row is held by another session (a transaction left open?) past the busy timeout")
		default:
			out[i].Result = results[i]
		}
	}
	return out, err
}

// commitTx writes a batch in one transaction, run again when it deadlocks.
// Any error fails the whole batch, and only it: each sender retries. The
// deliveries whose rows another session holds are left out and marked in
// waiting (by index in batch), so one held row does not fail the rest.
// It calls pass once the first attempt has landed the batch: what is left
// is the round trip of COMMIT, which another batch need not wait for.
func (s *Store) commitTx(batch []*write, pass func()) ([]inbox.Result, map[int]bool, error) {
	// Not the callers' contexts: a request that gives up must not abort the
	// transaction that carries its neighbours. Every caller has given up by
	// the busy timeout anyway.
	ctx, cancel := context.WithTimeout(context.Background(), s.busy)
	defer cancel()
	deliveries := make([]inbox.Delivery, 0, len(batch))
	idx := make([]int, 0, len(batch))
	probed, probeSize := false, 0
	for i, w := range batch {
		if w.Probe {
			probed, probeSize = true, max(probeSize, w.Op)
			continue
		}
		deliveries, idx = append(deliveries, w.Delivery), append(idx, i)
	}
	results := make([]inbox.Result, len(batch))
	var waiting map[int]bool
	err := s.inWriteTx(ctx, func(c *pgx.Conn, last *tail) (int64, error) {
		waiting = map[int]bool{}
		landed, held, tx, err := s.land(ctx, c, deliveries, last)
		if err != nil {
			return 0, err
		}
		pass()
		for j, i := range idx {
			results[i] = landed[j]
			if held[j] {
				waiting[i] = true
			}
		}
		if probed {
			// Last, so the row is held only for the commit.
			s.probe(last, probeSize, tx.now)
		}
		return tx.xid, nil
	})
	return results, waiting, err
}

// tail is what the writer's transaction sends with its COMMIT, in one
// round trip: the statements whose answers it does not wait for, and what
// each does, for its error.
type tail struct {
	b    pgx.Batch
	what []string
}

// queue adds a statement to t.
func (t *tail) queue(what, sql string, args ...any) {
	t.b.Queue(sql, args...)
	t.what = append(t.what, what)
}

// inWriteTx runs the writer's transaction as inTx runs others: again (up
// to maxAttempts, while ctx lasts) when it failed in a way a new attempt
// can cure, and, when the answer to COMMIT was lost, looked up rather
// than guessed at.
func (s *Store) inWriteTx(ctx context.Context, fn func(c *pgx.Conn, last *tail) (xid int64, err error)) error {
	for attempt := 1; ; attempt++ {
		again, err := s.tryWriteTx(ctx, fn)
		if err == nil || !again || attempt == maxAttempts || ctx.Err() != nil {
			return err
		}
	}
}

// tryWriteTx runs one attempt on a connection of the pool: fn begins the
// transaction on c, does what needs answers, and leaves the rest in last,
// which goes in one round trip with the durability check (commitGuard)
// and COMMIT. again reports whether a new attempt may succeed where this
// one failed.
func (s *Store) tryWriteTx(ctx context.Context, fn func(c *pgx.Conn, last *tail) (xid int64, err error)) (again bool, err error) {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return true, err
	}
	// The pool closes a connection released inside a transaction, or
	// broken, rather than hand it out again.
	defer pc.Release()
	c := pc.Conn()
	last := &tail{}
	xid, err := fn(c, last)
	if err != nil {
		broken := c.IsClosed()
		rollback(ctx, c)
		return retryable(err) || broken, err
	}
	last.queue("check that the commit is durable", commitGuard, s.unsafeNoFsync)
	last.queue("commit", `COMMIT`)
	br := c.SendBatch(ctx, &last.b)
	for i, what := range last.what {
		tag, err := br.Exec()
		switch {
		case err == nil && what == "commit" && tag.String() == "ROLLBACK":
			err = pgx.ErrTxCommitRollback
		case err == nil:
			continue
		}
		br.Close()
		if outcomeKnown(err) && i < len(last.what)-1 {
			// A statement before COMMIT failed: the server skipped the rest.
			rollback(ctx, c)
			if what == last.what[len(last.what)-2] {
				return false, s.refusedCommit(err)
			}
			return retryable(err), fmt.Errorf("%s: %w", what, err)
		}
		if outcomeKnown(err) {
			return retryable(err), fmt.Errorf("commit: %w", err)
		}
		// The answers were lost with COMMIT sent: ask the server what became
		// of the transaction rather than guess. Known not to have committed,
		// it may run again.
		committed, oerr := s.commitOutcome(ctx, xid)
		switch {
		case oerr != nil:
			return false, fmt.Errorf("commit: %w; whether it committed is unknown: %w", err, oerr)
		case committed:
			return false, nil
		}
		return true, fmt.Errorf("commit: %w", err)
	}
	if err := br.Close(); err != nil {
		return false, fmt.Errorf("commit: %w", err)
	}
	return false, nil
}

// rollback ends the transaction on c, if one is open; bounded by ctx, and
// at once on a broken connection.
func rollback(ctx context.Context, c *pgx.Conn) {
	if !c.IsClosed() && c.PgConn().TxStatus() != 'I' {
		c.Exec(ctx, `ROLLBACK`)
	}
}
