package health

import (
	"context"
	"errors"
	"sync"

	"inbox/inbox"
)

// Commits is what readiness knows of the store's real commits: the
// writer's group commits of deliveries (Committed, the stores' OnCommit)
// and the dispatcher's claims and settlements (Observe). It is the one
// place that decides how a commit's outcome bears on /readyz:
//
//   - A commit that failed puts the store in doubt. Every commit fails only
//     for the store's reasons (a full disk, an I/O error, a lock held past
//     the busy timeout, a revoked privilege, PostgreSQL unreachable or read
//     only, the file lost): what the sender did wrong (401, 413, a parked
//     body) is answered before the store and never commits, and a 503 for
//     --max-in-flight or --max-body-memory is load, refused before the
//     store too, so neither ever reaches here.
//
//   - While in doubt, each probe writes a margin over the largest delivery
//     of the failed commits (inbox.ProbeSize: twice it, bounded by
//     inbox.MaxProbeSize, and some pages more), beside its row in events
//     (see the stores' Probe), so it meets at least what they met: a disk
//     that takes the probe's small row but not a delivery fails it, and so
//     does one that takes exactly the delivery's bytes but not its row and
//     index pages.
//
//   - Any commit that succeeds afterwards, a probe's included, ends the
//     doubt. That is what lets a replica marked not ready, which gets no
//     deliveries, become ready again: its probe is the commit that
//     succeeds. But only a real commit that succeeds ends the probe's
//     size: until one does, each probe still writes that margin, so a
//     probe that once found room (a write-ahead log just started over, the
//     pages its own last write freed) does not make every probe after it
//     pass with its small row while deliveries still find none.
//
//   - Where readiness is the dispatcher's (inbox dispatch), a Settle of
//     settlements that failed (Settled) stands whatever the probe finds,
//     until a Settle succeeds: a probe meets none of the rows they wait
//     on (one another session holds, say), and the dispatcher settles them
//     again until they are recorded, so its own Settle ends the doubt.
//
// So /readyz fails as soon as the next probe after a failed commit fails,
// and passes again with the first commit, real or probe, that succeeds.
// A zero Commits is in no doubt. It is safe for concurrent use.
type Commits struct {
	mu     sync.Mutex
	seq    uint64 // outcomes recorded, so a probe clears only what it saw
	err    error  // the last failed commit's error, nil when not in doubt
	size   int    // the largest delivery of the failed commits since the last real commit that succeeded
	settle error  // the failed Settle's error (Settled), which only a Settle clears
}

// Committed records a group commit of the store's writer; it fits the
// stores' OnCommit.
func (c *Commits) Committed(commit inbox.Commit) {
	c.record(commit.Largest, commit.Err)
}

// Observe records the outcome of one of the dispatcher's writes (Start,
// Settle), which carry no body. An error of the caller's own context or of
// a closed store is not the store's outcome and is ignored.
func (c *Commits) Observe(err error) {
	if notTheStore(err) {
		return
	}
	c.record(0, err)
}

// Settled records the outcome of one of the dispatcher's Settle calls that
// carried settlements, where readiness is the dispatcher's: a failure
// stands, whatever a probe finds, until a Settle succeeds. An error of the
// caller's own context or of a closed store is ignored.
func (c *Commits) Settled(err error) {
	if notTheStore(err) {
		return
	}
	c.mu.Lock()
	c.settle = err
	c.mu.Unlock()
	c.record(0, err)
}

// notTheStore reports whether err is no outcome of the store's: the
// caller's own context, or a closed store.
func notTheStore(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, inbox.ErrClosed)
}

func (c *Commits) record(size int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	if err == nil {
		c.err, c.size = nil, 0
		return
	}
	// c.size is 0 but after a probe that committed with no delivery
	// since (see Commits): that size stays the probe's.
	c.err, c.size = err, max(c.size, size)
}

// doubt returns what a probe must write now, the failed commit's error
// (nil when not in doubt), and the record's position to hand to probed.
func (c *Commits) doubt() (size int, err error, seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		return inbox.ProbeSize(c.size), c.settle, c.seq
	}
	return inbox.ProbeSize(c.size), c.err, c.seq
}

// probed records a probe that committed, which clears the doubt unless a
// commit was recorded after seq, and returns the error of a commit that
// failed after seq, or of a failed Settle (Settled): that outcome stands.
// nil means ready.
func (c *Commits) probed(seq uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seq == seq {
		c.err = nil // c.size stays: see Commits
	}
	if c.err == nil {
		return c.settle
	}
	return c.err
}
