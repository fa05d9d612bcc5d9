package dispatch

import (
	"context"
	"time"
)

// downAgain is how often a dispatcher writes again that its destination
// is still down: another dispatcher of it (a replica, a restart) may have
// written that it is up meanwhile. It is also how often one that the
// destination answers deletes a record of it down again: one left by a
// dispatcher stopped or gone while it was down, whose successor this is
// not, is over.
const downAgain = 30 * time.Second

// downRecord is the Run loop's record of the destination's outage as it
// last wrote it.
type downRecord struct {
	since   time.Time // zero while up
	written time.Time // when it was last written or checked; zero: not yet
	// answered is the breaker's successes then.
	answered uint64
}

// watchDown reports whether the destination is down, and then how many
// rows may be claimed to probe it now (0 or 1), logging, showing and
// recording each change.
func (d *Dispatcher) watchDown(ctx context.Context, r *downRecord) (down bool, probe int) {
	since, cause, due := d.brk.down(time.Now())
	answered := d.brk.successes()
	switch {
	case since.IsZero() && (!r.since.IsZero() || r.written.IsZero()):
		// Up, after down, or at the start: whatever a dispatcher that
		// stopped while it was down recorded is over.
		if d.recordDown(ctx, time.Time{}, "") {
			r.since, r.written, r.answered = time.Time{}, time.Now(), answered
			d.metrics.down.Set(0)
		}
	case since.IsZero() && answered != r.answered && time.Since(r.written) > downAgain:
		// Up, and it answers: a record another dispatcher of it left
		// since (one stopped for good, or killed, while down) is over.
		if d.clearDown(ctx) {
			r.written, r.answered = time.Now(), answered
		}
	case !since.IsZero() && (!since.Equal(r.since) || time.Since(r.written) > downAgain):
		d.metrics.down.Set(1)
		if d.recordDown(ctx, since, cause) {
			r.since, r.written = since, time.Now()
		}
	}
	if since.IsZero() {
		return false, 0
	}
	if due {
		return true, 1
	}
	return true, 0
}

// clearDown deletes the destination's down record if there is one (a
// read first: nothing is written while there is none), and reports
// whether it found out.
func (d *Dispatcher) clearDown(ctx context.Context) bool {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	down, err := d.store.DownDestinations(rctx)
	if err != nil {
		return false
	}
	for _, dd := range down {
		if dd.Name == d.cfg.Route.Name {
			return d.recordDown(ctx, time.Time{}, "")
		}
	}
	return true
}

// forgetDown deletes the destination's down record: a reload removed
// the destination, so no successor is to probe it first, and no
// dispatcher is to show it down. A failure is logged.
func (d *Dispatcher) forgetDown(ctx context.Context) {
	d.recordDown(ctx, time.Time{}, "")
}

// takeOverDown starts the breaker down when the store says a dispatcher
// of this destination found it down (one stopped while it was down: a
// restart, a reload that changed the destination; one that died; a
// replica): the first row probes it, and none is counted ahead meanwhile.
// A read that fails starts it up.
func (d *Dispatcher) takeOverDown(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	down, err := d.store.DownDestinations(ctx)
	if err != nil {
		d.log.Warn().Err(err).Msg("cannot read whether the destination was down: starting as up")
		return
	}
	for _, dd := range down {
		if dd.Name == d.cfg.Route.Name {
			d.brk.resume(dd.Since, dd.Cause)
			d.log.Warn().Str(keyCause, dd.Cause).Time("since", dd.Since).Msg("destination recorded down: probing it first")
		}
	}
}

// recordDown writes the destination's outage to the store, and reports
// whether it did.
func (d *Dispatcher) recordDown(ctx context.Context, since time.Time, cause string) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := d.store.SetDown(ctx, d.cfg.Route.Name, since, cause); err != nil {
		d.log.Warn().Err(err).Msg("cannot record the destination's state: retrying")
		return false
	}
	return true
}
