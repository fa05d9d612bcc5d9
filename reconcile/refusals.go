// Package reconcile finds the jobs a provider gave up on and fetches them
// back: it remembers the deliveries the store refused (answered 503) until
// the store can keep them, and polls the provider's API for the expected
// jobs that were not delivered in time, asking it to redeliver those that
// ended.
package reconcile

import (
	"errors"
	"sync"
	"time"

	"inbox/inbox"
)

// DefaultMaxRefusals bounds the keys Refusals holds.
const DefaultMaxRefusals = 100_000

type refusalKey struct{ source, key string }

// Refusals remembers, in memory and bounded, the keys of verified
// deliveries the store could not take, until a Reconciler writes them to
// the store. Its methods are safe for concurrent use.
type Refusals struct {
	max int
	now func() time.Time

	mu      sync.Mutex
	keys    map[refusalKey]*inbox.Refusal
	dropped int64
}

// NewRefusals returns a memory of at most max keys (DefaultMaxRefusals when
// max is 0 or less); now is the clock, time.Now when nil.
func NewRefusals(max int, now func() time.Time) *Refusals {
	if max <= 0 {
		max = DefaultMaxRefusals
	}
	if now == nil {
		now = time.Now
	}
	return &Refusals{max: max, now: now, keys: map[refusalKey]*inbox.Refusal{}}
}

// Add remembers one refused delivery: its source, key, job and event, never
// its body. A key already held is counted again; a new key beyond the bound
// is dropped and counted in Dropped. It fits receiver.Config.OnRefused.
func (r *Refusals) Add(d inbox.Delivery, err error) {
	now := r.now().UTC()
	source := d.Source
	if source == "" {
		source = inbox.DefaultSource
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.merge(inbox.Refusal{Source: source, Key: d.Key, JobID: d.JobID, Event: d.Event, First: now, Last: now, Count: 1,
		Stored: errors.Is(err, inbox.ErrUnconfirmed)})
}

// merge adds one refusal to the memory; r.mu is held.
func (r *Refusals) merge(f inbox.Refusal) {
	k := refusalKey{f.Source, f.Key}
	if cur, ok := r.keys[k]; ok {
		cur.Count += f.Count
		if f.First.Before(cur.First) {
			cur.First = f.First
		}
		if f.Last.After(cur.Last) {
			cur.Last = f.Last
		}
		if f.Event != "" {
			cur.Event = f.Event
		}
		cur.Stored = cur.Stored || f.Stored
		return
	}
	if len(r.keys) >= r.max {
		r.dropped++
		return
	}
	r.keys[k] = &f
}

// Len returns how many keys wait to be written.
func (r *Refusals) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.keys)
}

// Dropped returns how many refused keys were not remembered, the memory
// being full.
func (r *Refusals) Dropped() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dropped
}

// take empties the memory and returns what it held.
func (r *Refusals) take() []inbox.Refusal {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]inbox.Refusal, 0, len(r.keys))
	for _, f := range r.keys {
		out = append(out, *f)
	}
	clear(r.keys)
	return out
}

// giveBack merges refusals that could not be written back into the memory,
// with those that arrived meanwhile.
func (r *Refusals) giveBack(refusals []inbox.Refusal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range refusals {
		r.merge(f)
	}
}
