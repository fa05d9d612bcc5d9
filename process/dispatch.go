package process

import (
	"context"
	"errors"
	"net/http"
	"time"

	"inbox/dispatch"
	"inbox/health"
	"inbox/inbox"
	"inbox/receiver"
	"inbox/reconcile"
)

// dispatch hands the rows on until ctx is done and, with an admin
// address, answers the probes (readiness following the commits and the
// destinations), /metrics, GET /destinations and POST /expect (status
// URLs on the API's host) there meanwhile. If that endpoint fails, the
// dispatcher is stopped too. It closes the store before it returns.
func (r *run) dispatch(ctx context.Context) error {
	cfg, log := r.cfg, r.log
	rec, err := newReconciler(cfg.Reconcile, r.store, nil, log, r.reg)
	if err != nil {
		return err
	}
	// Made last: from here on only their Run releases them.
	dests, err := r.destinations(ctx, observedQueue{r.store, r.commits, true}, true)
	if err != nil {
		return err
	}
	log.Info().Str("db", cfg.DB).Msg("starting")
	rctx, stopReloads := context.WithCancel(ctx)
	reloaded := make(chan struct{})
	go func() {
		defer close(reloaded)
		reloadOnHangup(rctx, r.hup, cfg.File, log, dests.reload)
	}()
	err = r.runWithOps(ctx, dests, rec)
	stopReloads()
	<-reloaded
	if err != nil {
		return err
	}
	return r.store.Close()
}

// runWithOps runs d and rec until ctx is done, with the ops endpoints on
// the admin address, if any, meanwhile (see dispatch).
func (r *run) runWithOps(ctx context.Context, d *liveDestinations, rec *reconcile.Reconciler) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reconciled := make(chan error, 1)
	go func() { reconciled <- rec.Run(ctx) }()
	if r.aln == nil {
		err := d.run(ctx)
		cancel()
		return errors.Join(err, <-reconciled)
	}
	ops := http.NewServeMux()
	handleOps(ops, r.store, r.commits, r.reg, r.log, d.dependencies)
	handleExpect(r.cfg.Reconcile.APIURL, ops, r.store, r.log)
	handleDestinations(ops, d)
	dispatched := make(chan error, 1)
	go func() {
		dispatched <- d.run(ctx)
		cancel() // the dispatcher is done: stop answering probes
	}()
	served := receiver.Serve(ctx, receiver.DefaultLimits(), r.log, receiver.Endpoint{Name: "admin", Listener: r.aln, Handler: ops})
	cancel()
	return errors.Join(<-dispatched, <-reconciled, served)
}

// observedQueue is the dispatcher's store with the outcome of each of its
// writes (Start, Settle) told to readiness, which follows them as it
// follows the deliveries' commits: on PostgreSQL they run in transactions
// of their own, beside the writer's. A settlement Settle refuses before
// writing (inbox.CheckSettle) is the caller's mistake, not the store's.
// With settles (inbox dispatch, whose readiness is its dispatching), a
// Settle of settlements that fails keeps readiness failing until a Settle
// succeeds (health.Commits.Settled), as the probe cannot meet what it met
// (a row another session holds); serve's readiness is about taking
// webhooks, which such a row does not stop, so there the probe decides.
type observedQueue struct {
	dispatch.Store
	commits *health.Commits
	settles bool
}

func (q observedQueue) Settle(ctx context.Context, owner string, settled []inbox.Settlement, claim inbox.Claim) ([]inbox.Job, int, error) {
	jobs, stale, err := q.Store.Settle(ctx, owner, settled, claim)
	switch {
	case err != nil && inbox.CheckSettle(owner, settled, claim) != nil:
	case q.settles && (err == nil || len(settled) > 0):
		q.commits.Settled(err)
	default:
		q.commits.Observe(err)
	}
	return jobs, stale, err
}

func (q observedQueue) Start(ctx context.Context, owner string, jobs []inbox.Job, now, until time.Time) ([]inbox.Job, error) {
	started, err := q.Store.Start(ctx, owner, jobs, now, until)
	q.commits.Observe(err)
	return started, err
}
