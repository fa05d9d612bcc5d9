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

// heldRetry is how soon deliveries whose rows another session held are
// tried again when no new delivery comes first.
const heldRetry = 20 * time.Millisecond

// newWriter is the store's group commit (inbox.GroupCommit), up to
// maxBatch deliveries and maxBatchBytes of bodies a commit. Deliveries
// whose rows another session held lead the next batch, until their
// callers' deadlines.
func (s *Store) newWriter() *inbox.GroupCommit[int] {
	return inbox.NewGroupCommit(inbox.GroupCommit[int]{
		MaxBatch: s.maxBatch, MaxBytes: maxBatchBytes, Retry: heldRetry,
		Commit: s.commit, OnCommit: s.onCommit, Stop: s.closing,
	})
}

// runWriter runs the group commit until Close.
func (s *Store) runWriter() {
	defer s.stopped.Done()
	s.writer.Run()
}

// commit writes a batch as commitTx does, and says what it made of each
// write: a delivery whose row another session holds waits for a later
// batch until its caller's deadline.
func (s *Store) commit(batch []*write) ([]inbox.Written, error) {
	results, waiting, err := s.commitTx(batch)
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
func (s *Store) commitTx(batch []*write) ([]inbox.Result, map[int]bool, error) {
	// Not the callers' contexts: a request that gives up must not abort the
	// transaction that carries its neighbours. Every caller has given up by
	// the busy timeout anyway.
	ctx, cancel := context.WithTimeout(context.Background(), s.busy)
	defer cancel()
	var deliveries []inbox.Delivery
	var idx []int
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
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		waiting = map[int]bool{}
		if len(deliveries) > 0 {
			landed, held, err := s.land(ctx, tx, deliveries)
			if err != nil {
				return err
			}
			for j, i := range idx {
				results[i] = landed[j]
				if held[j] {
					waiting[i] = true
				}
			}
		}
		if probed {
			// Last, so the row is held only for the commit.
			return s.probe(ctx, tx, probeSize)
		}
		return nil
	})
	return results, waiting, err
}
