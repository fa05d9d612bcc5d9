package inbox

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"
)

// The group commit every store's writer runs: callers hand it their
// writes, it takes the first waiting one, adds whatever else is already
// waiting, and has the store commit them as one transaction, so that one
// fsync acknowledges many deliveries. The store implements only the commit
// of a batch (GroupCommit.Commit): its transaction, and which of its
// failures a write waits on in a later batch.

// Write is one caller's request to a GroupCommit: a delivery to store, or
// the store's own write Op (the dispatcher's, the readiness probe's), which
// the store's commit runs in the batch's transaction.
type Write[Op any] struct {
	Delivery Delivery // what Put stores, when the store's Op is unset
	Op       Op
	// Probe marks the readiness probe's write (a store's Ping), which
	// OnCommit does not count.
	Probe bool
	// Deadline is when the caller gives up: the store's commit may keep
	// the write waiting (Written.Again) until then.
	Deadline time.Time
	done     chan Written // buffered: the loop never blocks on a caller
}

// Written is what a store's commit made of one write of its batch.
type Written struct {
	Result Result
	Err    error
	// Again sends the write to a later batch rather than to its caller:
	// this one could not take it (its row was held by another session,
	// another process held the lock). A store says so only while the
	// write's Deadline is ahead. When the commit succeeded, a write sent
	// again was left out of it, and OnCommit does not count it.
	Again bool
}

// GroupCommit is the loop of a store's writer. Set its fields, then run
// Run until Stop is closed; Send from any number of goroutines. Run may run
// in several goroutines at once (a store whose database commits several
// transactions at once): each takes batches of its own, so that several
// commits are in flight, and Commit is then called from each.
type GroupCommit[Op any] struct {
	// MaxBatch bounds how many writes one commit carries.
	MaxBatch int
	// MaxBytes, when above 0, bounds the delivery bodies one commit
	// carries: a batch is not filled past it.
	MaxBytes int
	// Retry is how soon writes sent again (Written.Again) are tried when
	// no new write comes first; 0 tries them at once.
	Retry time.Duration
	// Commit writes batch in one transaction and returns what it made of
	// each write, by index, and the error of the commit, nil when it
	// committed; a write it failed without an error of its own gets the
	// commit's. It is never called with an empty batch.
	Commit func(batch []*Write[Op]) ([]Written, error)
	// CommitTurn, when set, is called in place of Commit, and makes the
	// loops take their batches in turn: a loop takes a batch only while it
	// holds the turn, which CommitTurn passes on (pass) once the batch
	// needs it no longer, as soon as its first statements are answered,
	// so that the next loop's batch begins while this one's COMMIT (and
	// its flush) is under way. Calling pass again does nothing; the turn
	// is passed on when CommitTurn returns at the latest. Batches then
	// hold what waited while the one before them began, as one loop's
	// would, rather than the loops sharing out the writes as they come.
	CommitTurn func(batch []*Write[Op], pass func()) ([]Written, error)
	// TurnWait, when above 0, is how long a loop waits for the turn
	// (CommitTurn) before it takes a batch without it, so that a batch
	// slow to begin (its rows' inserts wait on another session's) holds
	// up the others no longer than that.
	TurnWait time.Duration
	// OnCommit, when set, is told of each commit that carried more than
	// the probe.
	OnCommit func(Commit)
	// Stop, closed, ends Run after the commit under way; writes not taken
	// by then fail with ErrClosed.
	Stop <-chan struct{}
	// MinFill and FillWait matter when Run runs in several goroutines: a
	// batch taken while another loop's commit is under way waits for
	// writes until it holds MinFill, that commit ends, or FillWait passes,
	// so that the loops commit batches of a useful size rather than a
	// write each (every commit costs the database a flush), and a slow
	// commit holds up no other batch for longer than FillWait. MinFill 0
	// never waits.
	MinFill  int
	FillWait time.Duration

	reqs    chan *Write[Op]
	commits *underWay
	turn    chan struct{} // holds the turn while no loop does (CommitTurn)
}

// underWay counts the commits under way of all of a GroupCommit's loops.
type underWay struct {
	mu    sync.Mutex
	n     int
	ended chan struct{} // closed, and replaced, as each commit ends
}

// busy returns whether a commit is under way, and a channel closed when
// one ends.
func (u *underWay) busy() (bool, <-chan struct{}) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.n > 0, u.ended
}

// begun and finished count a commit under way.
func (u *underWay) begun() {
	u.mu.Lock()
	u.n++
	u.mu.Unlock()
}

func (u *underWay) finished() {
	u.mu.Lock()
	u.n--
	close(u.ended)
	u.ended = make(chan struct{})
	u.mu.Unlock()
}

// NewGroupCommit returns g ready to Run.
func NewGroupCommit[Op any](g GroupCommit[Op]) *GroupCommit[Op] {
	g.reqs = make(chan *Write[Op])
	g.commits = &underWay{ended: make(chan struct{})}
	g.turn = make(chan struct{}, 1)
	g.turn <- struct{}{}
	return &g
}

// Send hands w to the loop and waits for what the commit that carries it
// made of it. It gives up, with context.Cause of the context, when handoff
// is done before the loop takes w ("waiting for the writer: ...") or wait
// is done before its commit ends ("waiting for the commit: ..."); the
// write may then still commit (a sender's retry is a counted repeat). It
// fails with ErrClosed once Stop is closed.
func (g *GroupCommit[Op]) Send(handoff, wait context.Context, w *Write[Op]) Written {
	w.done = make(chan Written, 1)
	select {
	case g.reqs <- w:
	case <-g.Stop:
		return Written{Err: ErrClosed}
	case <-handoff.Done():
		return Written{Err: fmt.Errorf("waiting for the writer: %w", context.Cause(handoff))}
	}
	select {
	case r := <-w.done:
		return r
	case <-wait.Done():
		return Written{Err: fmt.Errorf("waiting for the commit: %w", context.Cause(wait))}
	}
}

// Run takes the first waiting write, adds whatever else is already
// waiting (up to MaxBatch and MaxBytes, without waiting for more), and
// commits them as one transaction, until Stop is closed. Writes the commit
// sent again lead the next batch.
func (g *GroupCommit[Op]) Run() {
	batch := make([]*Write[Op], 0, g.MaxBatch)
	var again []*Write[Op]
	var retry *time.Timer
	var fillWait, turnWait *time.Timer // made when first needed
	if g.Retry > 0 {
		retry = time.NewTimer(g.Retry)
		defer retry.Stop()
	}
	for {
		batch = append(batch[:0], again...)
		again = again[:0]
		held := false // the turn (CommitTurn)
		pass := func() {
			if held {
				held = false
				g.turn <- struct{}{}
			}
		}
		if g.CommitTurn != nil {
			var late <-chan time.Time // nil, which a select never takes, without TurnWait
			if g.TurnWait > 0 {
				if turnWait == nil {
					turnWait = time.NewTimer(g.TurnWait)
					defer turnWait.Stop()
				} else {
					turnWait.Reset(g.TurnWait)
				}
				late = turnWait.C
			}
			select {
			case <-g.turn:
				held = true
			case <-late:
			case <-g.Stop:
				closed(batch)
				return
			}
			if turnWait != nil {
				turnWait.Stop()
			}
		}
		switch {
		case len(batch) == 0 || retry != nil:
			var retryC <-chan time.Time // nil, which a select never takes, unless writes wait
			if len(batch) > 0 {
				retry.Reset(g.Retry)
				retryC = retry.C
			}
			select {
			case w := <-g.reqs:
				batch = append(batch, w)
			case <-retryC:
			case <-g.Stop:
				pass()
				closed(batch)
				return
			}
		default:
			select {
			case <-g.Stop:
				pass()
				closed(batch)
				return
			default:
			}
		}
		size := 0
		for _, w := range batch {
			size += len(w.Delivery.Body)
		}
		room := func() bool { return len(batch) < g.MaxBatch && (g.MaxBytes <= 0 || size < g.MaxBytes) }
		// On one P the senders the last commit's answers woke, and those
		// whose requests came in meanwhile, cannot run while the loop
		// does: without a turn for them first, a batch takes only the one
		// or two already waiting, and each commit's flush then carries
		// that few (under `bench -pin`, batches of 1.5 deliveries). With
		// more Ps they run beside the loop.
		yielded := runtime.GOMAXPROCS(0) > 1
	fill:
		for room() {
			select {
			case w := <-g.reqs:
				batch = append(batch, w)
				size += len(w.Delivery.Body)
			default:
				if !yielded {
					yielded = true
					runtime.Gosched()
					continue
				}
				break fill
			}
		}
		if len(batch) < g.MinFill {
			if busy, ended := g.commits.busy(); busy {
				if fillWait == nil {
					fillWait = time.NewTimer(g.FillWait)
					defer fillWait.Stop()
				} else {
					fillWait.Reset(g.FillWait)
				}
			wait:
				for len(batch) < g.MinFill && room() {
					select {
					case w := <-g.reqs:
						batch = append(batch, w)
						size += len(w.Delivery.Body)
					case <-ended:
						break wait
					case <-fillWait.C:
						break wait
					case <-g.Stop:
						pass()
						closed(batch)
						return
					}
				}
				fillWait.Stop()
			}
		}
		// A write whose caller has given up is not begun: it was answered
		// as refused, and must not be kept after that answer.
		start := time.Now()
		live := batch[:0]
		for _, w := range batch {
			if !w.Deadline.IsZero() && !start.Before(w.Deadline) {
				w.done <- Written{Err: ErrGivenUp}
				continue
			}
			live = append(live, w)
		}
		if batch = live; len(batch) == 0 {
			pass()
			continue
		}
		g.commits.begun()
		var out []Written
		var err error
		if g.CommitTurn != nil {
			out, err = g.CommitTurn(batch, pass)
			pass()
		} else {
			out, err = g.Commit(batch)
		}
		g.commits.finished()
		if n, largest := counted(batch, out, err); g.OnCommit != nil && n > 0 {
			g.OnCommit(Commit{N: n, Largest: largest, Took: time.Since(start), Err: err})
		}
		for i, w := range batch {
			r := out[i]
			switch {
			case r.Again:
				again = append(again, w)
				continue
			case err != nil && r.Err == nil:
				// Never an answer of success from a commit that failed: the
				// caller would take the write as kept.
				r = Written{Err: err}
			}
			w.done <- r
		}
	}
}

// closed fails the writes of batch with ErrClosed.
func closed[Op any](batch []*Write[Op]) {
	for _, w := range batch {
		w.done <- Written{Err: ErrClosed}
	}
}

// counted is how many writes of batch OnCommit reports (all but the
// probe's, and those a commit that succeeded left out), and the largest
// body among them all.
func counted[Op any](batch []*Write[Op], out []Written, err error) (n, largest int) {
	for i, w := range batch {
		if w.Probe {
			continue
		}
		largest = max(largest, len(w.Delivery.Body))
		if err != nil || !out[i].Again {
			n++
		}
	}
	return n, largest
}
