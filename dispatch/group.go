package dispatch

import (
	"context"
	"errors"
	"sync"
)

// Group is the dispatchers of every configured destination, one each: a
// row is handed to each destination whose filters take it, and each works
// at its own pace, so one that fails or is paused holds back no other.
type Group []*Dispatcher

// Run runs every dispatcher of g until ctx is done, and returns once each
// has finished what it started, with their errors joined.
func (g Group) Run(ctx context.Context) error {
	errs := make([]error, len(g))
	var wg sync.WaitGroup
	for i, d := range g {
		wg.Go(func() { errs[i] = d.Run(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
