package dispatch

import (
	"slices"
	"sync"
	"time"
)

// How an attempt is judged slow when Config.SlowAfter is zero: past four
// times what nine in ten of the destination's recent successful attempts
// took (so a destination that is slow all the time keeps its workers), not
// sooner than slowFloor and not later than a quarter of Timeout; before the
// destination has answered minSamples times, past slowFirst. slowFloor and
// slowFirst are at most a twentieth of Timeout: rows that hang at a fast
// destination delay the others by that much, not by Timeout.
const (
	slowFactor = 4
	slowFloor  = 250 * time.Millisecond
	slowFirst  = time.Second
	minSamples = 8
	maxSamples = 64
	slowCheck  = 50 * time.Millisecond // how often an attempt under way is judged again
)

// slowAfter returns how long an attempt may hold its worker before it goes
// on beside the workers: Config.SlowAfter when set, else what fits the
// destination's recent answers.
func (d *Dispatcher) slowAfter() time.Duration {
	if d.cfg.SlowAfter > 0 {
		return d.cfg.SlowAfter
	}
	part := d.cfg.Timeout / 20
	p90, ok := d.times.p90()
	if !ok {
		return min(slowFirst, part)
	}
	return min(max(slowFactor*p90, min(slowFloor, part)), d.cfg.Timeout/4)
}

// durations keeps how long the last successful attempts took.
type durations struct {
	mu   sync.Mutex
	ring [maxSamples]time.Duration
	n    int // attempts recorded, ever
}

func (t *durations) add(d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ring[t.n%maxSamples] = d
	t.n++
}

// p90 returns what nine in ten of the recorded attempts took at most; ok is
// false before minSamples are recorded.
func (t *durations) p90() (time.Duration, bool) {
	t.mu.Lock()
	n := min(t.n, maxSamples)
	if n < minSamples {
		t.mu.Unlock()
		return 0, false
	}
	s := slices.Clone(t.ring[:n])
	t.mu.Unlock()
	slices.Sort(s)
	return s[(n-1)*9/10], true
}
