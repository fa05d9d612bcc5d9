package dispatch

import (
	"testing"

	"golang.org/x/time/rate"
)

// TestResize: workers that ran out of rows double the rows held a worker
// while the claim took all it asked for, up to maxHeldPerWorker; a row
// that waited long halves them, down to heldPerWorker; bodies held past
// heldBodies bring them back to heldPerWorker at once, whatever the
// workers saw; a claim short of rows, or a Rate, leaves them.
func TestResize(t *testing.T) {
	t.Parallel()
	var d Dispatcher
	steps := []struct {
		name             string
		starved, waited  bool
		full             bool
		body, from, want int
	}{
		{"starved, the claim full", true, false, true, 0, heldPerWorker, 2 * heldPerWorker},
		{"starved, the queue short", true, false, false, 0, heldPerWorker, heldPerWorker},
		{"starved again", true, false, true, 0, 2 * heldPerWorker, 4 * heldPerWorker},
		{"starved at the most", true, false, true, 0, maxHeldPerWorker, maxHeldPerWorker},
		{"not starved", false, false, true, 0, heldPerWorker, heldPerWorker},
		{"a row waited long", false, true, true, 0, maxHeldPerWorker, maxHeldPerWorker / 2},
		{"waited and starved", true, true, true, 0, 2 * heldPerWorker, heldPerWorker},
		{"waited at the least", false, true, true, 0, heldPerWorker, heldPerWorker},
		{"bodies past the budget", true, false, true, heldBodies + 1, maxHeldPerWorker, heldPerWorker},
	}
	d.limit = rate.NewLimiter(10, 1)
	d.starved.Store(true)
	if got := d.resize(heldPerWorker, true, true, 0); got != heldPerWorker {
		t.Errorf("with a rate: from %d to %d, want it kept", heldPerWorker, got)
	}
	d.limit = nil
	// Workers that ran out of rows as the queue did: a claim short of
	// rows forgets it, and the next full one does not grow.
	d.starved.Store(true)
	d.resize(heldPerWorker, true, false, 0)
	if got := d.resize(heldPerWorker, true, true, 0); got != heldPerWorker {
		t.Errorf("a full claim after a short one: from %d to %d, want it kept", heldPerWorker, got)
	}
	for _, st := range steps {
		d.starved.Store(st.starved)
		d.waitedLong.Store(st.waited)
		if got := d.resize(st.from, true, st.full, st.body); got != st.want {
			t.Errorf("%s: from %d to %d, want %d", st.name, st.from, got, st.want)
		}
		if st.waited && d.waitedLong.Load() {
			t.Errorf("%s: the long wait is still to be seen", st.name)
		}
	}
}
