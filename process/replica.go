package process

import (
	"context"
	"fmt"
	"time"

	"inbox/health"
	"inbox/metrics"
	"inbox/replica"
)

// replicated is a store whose SQLite file a Replicator copies off the
// machine (serve --replica).
type replicated interface {
	Replica() *replica.Replicator
}

// watchReplica registers the replica's metrics when the store has one, and
// returns the /readyz line that says how it stands (nil without one).
// Under --replica-sync it gates readiness: deliveries get 503 while the
// replica cannot be reached.
func (r *run) watchReplica() []health.Dependency {
	rs, ok := r.store.(replicated)
	if !ok {
		return nil
	}
	rep := rs.Replica()
	metrics.Replica(r.reg, func() float64 { return rep.Status().Lag }, func() int64 { return rep.Status().Errors })
	return []health.Dependency{{Name: "replica", Gates: rep.Sync(), State: func(context.Context) (bool, string) {
		return replicaState(rep.Status())
	}}}
}

// replicaState is the /readyz line of st: never its URL (the answer may
// be public).
func replicaState(st replica.Status) (bool, string) {
	lag := time.Duration(st.Lag * float64(time.Second)).Round(100 * time.Millisecond)
	mode := "trails by up to a second"
	if st.Sync {
		mode = "deliveries wait for it"
	}
	if st.Error != "" {
		return false, fmt.Sprintf("cannot be reached (%d failed syncs), behind by %s", st.Errors, lag)
	}
	return true, fmt.Sprintf("ok, %s, behind by %s", mode, lag)
}

// withReplica returns deps with the replica's lines after them.
func withReplica(deps func() []health.Dependency, rep []health.Dependency) func() []health.Dependency {
	if len(rep) == 0 {
		return deps
	}
	return func() []health.Dependency { return append(deps(), rep...) }
}
