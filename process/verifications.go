package process

import (
	"context"
	"maps"
	"slices"
	"time"

	"inbox/inbox"
)

// secretUsePeriod is how often serve saves when each secret last verified
// a delivery, and the requests that failed verification: cheap, and fine
// enough to tell when an old secret can go or a rotation broke. A flood of
// forgeries costs no more writes than one.
const secretUsePeriod = time.Minute

// recordVerifications saves the secret uses, then the failed
// verifications, every period (serve's is secretUsePeriod) and once more
// when ctx is done, within last, then returns the last save's error. uses
// returns the secret uses, and what to call once they are saved;
// unverified takes the failures since its last call, which are kept, one
// run a source, until a save takes them. The uses go first: a run the
// store holds is over once a delivery verified after it began.
func recordVerifications(ctx context.Context, store inbox.Store, uses func() ([]inbox.SecretUse, func()), unverified func() []inbox.Unverified, every, last time.Duration) error {
	pending := map[string]inbox.Unverified{}
	save := func(ctx context.Context) error {
		for _, run := range unverified() {
			if run.Count > 0 {
				pending[run.Source] = pending[run.Source].Add(run)
			}
		}
		u, saved := uses()
		if err := store.RecordSecretUses(ctx, u); err != nil {
			return err
		}
		saved()
		runs := slices.Collect(maps.Values(pending))
		if err := store.RecordUnverified(ctx, runs); err != nil {
			return err
		}
		clear(pending)
		return nil
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			save(ctx) // a failed save is retried at the next tick, with the same times and failures
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), last)
			defer cancel()
			return save(sctx)
		}
	}
}
