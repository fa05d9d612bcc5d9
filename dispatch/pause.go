package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Gate is a Destination that can tell, without sending anything, that no
// delivery could succeed now: the NATS publisher, whose connection to the
// broker is down or whose stream does not answer. While Ready fails the
// dispatcher pauses: it claims no row and starts no attempt, and gives the
// rows it holds back with no attempt counted, so an outage of any length
// uses up no row's retry schedule. It looks again every pauseCheck at
// most, and resumes once Ready succeeds. An attempt already started when
// the destination went away still counts.
//
// Only a destination whose failures cannot be caused by the row itself
// should be a Gate: a row that crashes an application would otherwise
// pause every delivery instead of being parked after its schedule.
type Gate interface {
	// Ready returns nil when deliveries can be attempted, else why not
	// (no secret or address: it is logged). It must return at once.
	Ready() error
}

// pauseCheck bounds how long a paused dispatcher takes to notice that its
// destination is back.
const pauseCheck = 100 * time.Millisecond

// reachable returns why the destination cannot be reached now, or nil
// (always nil for a destination that is not a Gate), or why it is held
// (Config.Held).
func (d *Dispatcher) reachable() error {
	if d.cfg.Held != nil {
		if err := d.cfg.Held(); err != nil {
			return err
		}
	}
	g, ok := d.cfg.Destination.(Gate)
	if !ok {
		return nil
	}
	return g.Ready()
}

// pause is the Run loop's record of whether it is paused, since when, and
// why.
type pause struct {
	since time.Time // zero while not paused
	cause string
}

// check looks at the destination and reports whether Run must claim
// nothing now, logging and showing each change.
func (d *Dispatcher) check(p *pause) bool {
	err := d.reachable()
	switch {
	case err != nil && p.since.IsZero() && errors.Is(err, errHeld):
		p.since, p.cause = time.Now(), errorText(err)
		d.metrics.paused.Set(1)
		d.log.Warn().Msg("destination paused by an operator: no row is claimed or attempted until inbox resume")
	case err != nil && p.since.IsZero():
		p.since, p.cause = time.Now(), errorText(err)
		d.metrics.paused.Set(1)
		d.log.Warn().Str(keyCause, p.cause).Msg("destination unreachable: paused, no row is claimed or attempted until it is back")
	case err != nil:
		if cause := errorText(err); cause != p.cause {
			p.cause = cause
			d.log.Info().Str(keyCause, cause).Msg("destination still unreachable: paused")
		}
	case !p.since.IsZero():
		d.log.Info().Dur(keyDuration, time.Since(p.since)).Msg("destination reachable again: resuming")
		p.since, p.cause = time.Time{}, ""
		d.metrics.paused.Set(0)
	}
	return err != nil
}

// State is what /readyz shows of the dispatcher's destination: whether it
// is attempting deliveries now, and if not, why (paused by an operator,
// its Gate away, or down: see breaker), in a few words, never an address.
func (d *Dispatcher) State(context.Context) (ok bool, detail string) {
	if d.cfg.Held != nil && d.cfg.Held() != nil {
		return false, "paused by an operator"
	}
	if d.reachable() != nil {
		return false, "unreachable: paused"
	}
	if since, _, _ := d.brk.down(time.Now()); !since.IsZero() {
		return false, fmt.Sprintf("down for %s: rows wait, probing", time.Since(since).Round(time.Second))
	}
	return true, "dispatching"
}
