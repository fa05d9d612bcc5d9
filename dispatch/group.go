package dispatch

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// HoldPoll is how often a Group reads which destinations an operator
// paused: a pause or resume reaches every running dispatcher within it.
const HoldPoll = time.Second

// Group is the dispatchers of every configured destination, one each: a
// row is handed to each destination whose filters take it, and each works
// at its own pace, so one that fails or is paused holds back no other.
type Group struct {
	Dispatchers []*Dispatcher
	Holds       *Holds
}

// Run runs every dispatcher of g, and the reading of its holds, until ctx
// is done, and returns once each dispatcher has finished what it started,
// with their errors joined.
func (g Group) Run(ctx context.Context) error {
	errs := make([]error, len(g.Dispatchers))
	var wg sync.WaitGroup
	hctx, stop := context.WithCancel(ctx)
	if g.Holds != nil {
		wg.Go(func() { g.Holds.Run(hctx) })
	}
	var dwg sync.WaitGroup
	for i, d := range g.Dispatchers {
		dwg.Go(func() { errs[i] = d.Run(ctx) })
	}
	dwg.Wait()
	stop()
	wg.Wait()
	return errors.Join(errs...)
}

// Holds is which destinations an operator paused (inbox pause), as last
// read from the store, shared by the dispatchers of a Group.
type Holds struct {
	read   func(context.Context) ([]string, error)
	paused atomic.Pointer[map[string]bool]
}

// NewHolds returns Holds that read the paused destinations with read.
func NewHolds(read func(context.Context) ([]string, error)) *Holds {
	h := &Holds{read: read}
	h.paused.Store(&map[string]bool{})
	return h
}

// errHeld is why a paused destination's dispatcher attempts nothing.
var errHeld = errors.New("paused by an operator (inbox resume resumes it)")

// Held returns the Config.Held of the destination name.
func (h *Holds) Held(name string) func() error {
	return func() error {
		if h.Paused(name) {
			return errHeld
		}
		return nil
	}
}

// Paused reports whether the destination name was paused when last read.
func (h *Holds) Paused(name string) bool { return (*h.paused.Load())[name] }

// Run reads the paused destinations every HoldPoll until ctx is done. A
// read that fails keeps what the last one found: the claims themselves
// pass over a paused destination's rows.
func (h *Holds) Run(ctx context.Context) {
	t := time.NewTicker(HoldPoll)
	defer t.Stop()
	for {
		if names, err := h.read(ctx); err == nil {
			m := make(map[string]bool, len(names))
			for _, n := range names {
				m[n] = true
			}
			h.paused.Store(&m)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
