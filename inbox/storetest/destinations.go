package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"inbox/inbox"
)

// routes are three destinations: one per source filter, one per event
// filter, one taking every row.
var routes = []inbox.Route{
	{Name: "app", Sources: []string{inbox.DefaultSource}},
	{Name: "failures", Events: []string{"job.failed"}},
	{Name: "audit"},
}

// claimFor claims up to n pairs of dest for owner at now, routing by
// routes first.
func (e *env) claimFor(dest, owner string, now time.Time, n int) []inbox.Job {
	e.t.Helper()
	e.clock.Set(now)
	jobs, _, err := e.s.Settle(context.Background(), owner, nil,
		inbox.Claim{Now: now, Until: now.Add(time.Minute), Max: n, Destination: dest, Routes: routes})
	if err != nil {
		e.t.Fatalf("claim for %s: %v", dest, err)
	}
	for _, j := range jobs {
		if j.Destination != dest {
			e.t.Fatalf("claimed %s for %s, want %s", j.ID, j.Destination, dest)
		}
	}
	return jobs
}

// pairs returns the row id's destinations and their statuses, as
// "dest:status".
func (e *env) pairs(id string) []string {
	e.t.Helper()
	ds, err := e.s.Deliveries(context.Background(), id)
	if err != nil {
		e.t.Fatalf("deliveries of %s: %v", id, err)
	}
	var out []string
	for _, d := range ds {
		out = append(out, fmt.Sprintf("%s:%s", d.Destination, d.Status))
	}
	return out
}

func runDestinations(t *testing.T, o opener) {
	t.Run("routings recorded, replaced, aged and forgotten", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		ctx := context.Background()
		a := []inbox.Route{{Name: "crm", Events: []string{"job.failed", "job.completed"}}, {Name: "app"}}
		if err := e.s.RecordRouting(ctx, "one", a, t0); err != nil {
			t.Fatal(err)
		}
		if err := e.s.RecordRouting(ctx, "two", routes[:1], t0.Add(-time.Minute)); err != nil {
			t.Fatal(err)
		}
		got, err := e.s.Routings(ctx, t0.Add(-inbox.RoutingLive))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Owner != "one" || !got[0].SeenAt.Equal(t0) ||
			inbox.EncodeRoutes(got[0].Routes) != inbox.EncodeRoutes(a) || got[0].Routes[0].Name != "app" {
			t.Fatalf("live routings = %+v, want one's, sorted", got)
		}
		// Recorded again: replaced, live again.
		if err := e.s.RecordRouting(ctx, "two", routes, t0); err != nil {
			t.Fatal(err)
		}
		got, _ = e.s.Routings(ctx, t0)
		if len(got) != 2 || got[1].Owner != "two" || len(got[1].Routes) != len(routes) {
			t.Fatalf("routings = %+v, want one's and two's new one", got)
		}
		if c := inbox.ConflictingRoutings(got); len(c) != 2 {
			t.Fatalf("conflicts = %+v, want two tables", c)
		}
		if n := inbox.LiveNames(got); !slices.Equal(n, []string{"app", "audit", "crm", "failures"}) {
			t.Fatalf("live names = %v", n)
		}
		if err := e.s.RecordRouting(ctx, "two", nil, t0); err != nil {
			t.Fatal(err)
		}
		got, _ = e.s.Routings(ctx, time.Time{})
		if len(got) != 1 || got[0].Owner != "one" || inbox.ConflictingRoutings(got) != nil {
			t.Fatalf("routings after two forgot = %+v, want one's alone", got)
		}
	})
	t.Run("fan out by filters", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		e.put(job("job_1"))
		e.put(classify(`{"event":"job.failed","job_id":"job_2","status":"ERROR"}`))
		e.put(keyed("vibe", "run_1", "run.done", []byte(`{"id":"run_1"}`), deliveryTS, inbox.Rules{MaxBody: 1 << 20}))
		at := t0.Add(time.Second)
		got := map[string][]string{}
		for _, dest := range []string{"app", "failures", "audit"} {
			got[dest] = ids(e.claimFor(dest, "o", at, 10))
		}
		want := map[string][]string{
			"app":      {"job_1#1", "job_2#1"},
			"failures": {"job_2#1"},
			"audit":    {"job_1#1", "job_2#1", "vibe/run_1#1"},
		}
		for dest, w := range want {
			if !slices.Equal(got[dest], w) {
				t.Errorf("%s claimed %v, want %v", dest, got[dest], w)
			}
		}
		if p := e.pairs("job_2"); !slices.Equal(p, []string{"app:new", "audit:new", "failures:new"}) {
			t.Errorf("job_2's pairs = %v", p)
		}
	})

	t.Run("each destination settles its own pair", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		e.put(classify(`{"event":"job.failed","job_id":"job_2","status":"ERROR"}`))
		at := t0.Add(time.Second)
		app := e.claimFor("app", "o", at, 10)
		fail := e.claimFor("failures", "o", at, 10)
		audit := e.claimFor("audit", "o", at, 10)
		if len(app) != 1 || len(fail) != 1 || len(audit) != 1 {
			t.Fatalf("claimed %d, %d, %d, want one each", len(app), len(fail), len(audit))
		}
		// A failure of one destination leaves the others' pairs alone.
		e.settle("o", at, inbox.Settlement{Job: fail[0], Fate: inbox.FatePark, At: at, Reason: inbox.ReasonHandlerRejected, Error: "HTTP 422"})
		e.settle("o", at, inbox.Settlement{Job: app[0], Fate: inbox.FateDone, At: at})
		if r := e.get("job_2"); r.Status != inbox.StatusNew {
			t.Errorf("row with audit still to take it is %s, want new", r.Status)
		}
		if p := e.pairs("job_2"); !slices.Equal(p, []string{"app:done", "audit:new", "failures:parked"}) {
			t.Errorf("pairs = %v", p)
		}
		later := at.Add(time.Second)
		e.settle("o", later, inbox.Settlement{Job: audit[0], Fate: inbox.FateDone, At: later})
		if r := e.get("job_2"); r.Status != inbox.StatusParked || r.Reason != inbox.ReasonHandlerRejected || !r.UpdatedAt.Equal(later) {
			t.Errorf("row one destination parked = %s %s at %s, want parked handler_rejected at %s", r.Status, r.Reason, r.UpdatedAt, later)
		}
	})

	t.Run("reprocess retries only the destinations that parked the row", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		e.put(classify(`{"event":"job.failed","job_id":"job_2","status":"ERROR"}`))
		at := t0.Add(time.Second)
		app, fail, audit := e.claimFor("app", "o", at, 1), e.claimFor("failures", "o", at, 1), e.claimFor("audit", "o", at, 1)
		e.settle("o", at,
			inbox.Settlement{Job: app[0], Fate: inbox.FateDone, At: at},
			inbox.Settlement{Job: fail[0], Fate: inbox.FatePark, At: at, Reason: inbox.ReasonHandlerFailed, Error: "HTTP 500"},
			inbox.Settlement{Job: audit[0], Fate: inbox.FateDone, At: at})
		if r := e.get("job_2"); r.Status != inbox.StatusParked {
			t.Fatalf("row = %s, want parked", r.Status)
		}
		if rep := e.reprocess(inbox.Selection{IDs: []string{"job_2"}}, sume(rules.Events...), false); rep.Moved != 1 {
			t.Fatalf("reprocess: %+v, want 1 moved", rep)
		}
		for _, dest := range []string{"app", "audit"} {
			if got := e.claimFor(dest, "o", at, 10); len(got) != 0 {
				t.Errorf("%s, which took the row, claimed it again: %v", dest, ids(got))
			}
		}
		if got := ids(e.claimFor("failures", "o", at, 10)); !slices.Equal(got, []string{"job_2#1"}) {
			t.Errorf("failures claimed %v, want job_2 afresh", got)
		}
		if p := e.pairs("job_2"); !slices.Equal(p, []string{"app:done", "audit:done", "failures:new"}) {
			t.Errorf("pairs after reprocess = %v", p)
		}
	})

	t.Run("a row no destination takes is done", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		e.put(keyed("vibe", "run_1", "run.done", []byte(`{"id":"run_1"}`), deliveryTS, inbox.Rules{MaxBody: 1 << 20}))
		at := t0.Add(time.Second)
		e.clock.Set(at)
		only := []inbox.Route{{Name: "app", Sources: []string{inbox.DefaultSource}}}
		jobs, _, err := e.s.Settle(context.Background(), "o", nil, inbox.Claim{Now: at, Until: at.Add(time.Minute), Max: 5, Destination: "app", Routes: only})
		if err != nil || len(jobs) != 0 {
			t.Fatalf("claim: %v, %v", jobs, err)
		}
		if r := e.get("vibe/run_1"); r.Status != inbox.StatusDone {
			t.Errorf("row no destination takes is %s, want done", r.Status)
		}
	})

	t.Run("a claim routes the rows it takes, and past them only for rows it does not take", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		for i := 1; i <= 6; i++ {
			e.put(job(fmt.Sprintf("job_%d", i)))
			e.clock.Add(time.Millisecond)
		}
		e.put(classify(`{"event":"job.failed","job_id":"job_7","status":"ERROR"}`))
		at := e.clock.Now().Add(time.Second)
		// app takes every row: two claimed, two routed, the rest left
		// for later claims (each routed row is written again by the
		// claim that takes it).
		if got := ids(e.claimFor("app", "o", at, 2)); !slices.Equal(got, []string{"job_1#1", "job_2#1"}) {
			t.Fatalf("app claimed %v, want the two oldest", got)
		}
		for i := 3; i <= 7; i++ {
			if p := e.pairs(fmt.Sprintf("job_%d", i)); len(p) != 0 {
				t.Errorf("job_%d, not claimed, was routed: %v", i, p)
			}
		}
		// failures takes only job.failed, the newest row: its claim of one
		// routes past the rows it does not take to reach it.
		if got := ids(e.claimFor("failures", "o", at, 1)); !slices.Equal(got, []string{"job_7#1"}) {
			t.Errorf("failures claimed %v, want job_7", got)
		}
		if p := e.pairs("job_3"); !slices.Equal(p, []string{"app:new", "audit:new"}) {
			t.Errorf("job_3, routed on the way to job_7, has pairs %v", p)
		}
	})

	t.Run("a destination added later gets only rows routed after", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		e.put(job("job_1"))
		at := t0.Add(time.Second)
		e.clock.Set(at)
		first := []inbox.Route{{Name: "app"}}
		if _, _, err := e.s.Settle(context.Background(), "o", nil, inbox.Claim{Now: at, Until: at.Add(time.Minute), Max: 5, Destination: "app", Routes: first}); err != nil {
			t.Fatal(err)
		}
		e.put(job("job_2"))
		if got := ids(e.claimFor("audit", "o", at, 10)); !slices.Equal(got, []string{"job_2#1"}) {
			t.Errorf("the later destination claimed %v, want job_2 alone", got)
		}
	})

	t.Run("pause", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		ctx := context.Background()
		e.put(job("job_1"))
		if err := e.s.SetPaused(ctx, "app", true); err != nil {
			t.Fatal(err)
		}
		if err := e.s.SetPaused(ctx, "app", true); err != nil {
			t.Fatalf("pause twice: %v", err)
		}
		at := t0.Add(time.Second)
		if got := e.claimFor("app", "o", at, 10); len(got) != 0 {
			t.Errorf("a paused destination claimed %v", ids(got))
		}
		if got := e.claimFor("audit", "o", at, 10); len(got) != 1 {
			t.Errorf("another destination claimed %v while app is paused, want job_1", ids(got))
		}
		st, err := e.s.Destinations(ctx, at)
		if err != nil {
			t.Fatal(err)
		}
		if len(st) != 2 || st[0].Name != "app" || !st[0].Paused || st[0].ByStatus[inbox.StatusNew] != 1 || st[1].Paused || st[1].InFlight != 1 {
			t.Errorf("destinations = %+v, want app paused with 1 new, audit with 1 in flight", st)
		}
		if r := e.get("job_1"); r.Attempts != 0 {
			t.Errorf("attempts = %d while paused", r.Attempts)
		}
		if err := e.s.SetPaused(ctx, "app", false); err != nil {
			t.Fatal(err)
		}
		if p, err := e.s.PausedDestinations(ctx); err != nil || len(p) != 0 {
			t.Errorf("paused after resume = %v, %v", p, err)
		}
		if got := e.claimFor("app", "o", at, 10); len(got) != 1 || got[0].Attempt != 1 {
			t.Errorf("resumed app claimed %v, want job_1#1", ids(got))
		}
	})

	t.Run("a destination's outage is recorded, paused wins, up clears it", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		ctx := context.Background()
		e.put(job("job_1"))
		e.claimFor("audit", "o", t0, 1) // routes job_1 to app and audit
		// An attempt given back for the destination's outage: uncounted,
		// due when the settlement says, its error kept.
		j := e.start("o", e.claimFor("app", "o", t0, 1), t0, t0.Add(time.Minute))[0]
		later := t0.Add(time.Hour)
		e.settle("o", t0, inbox.Settlement{Job: j, Fate: inbox.FateUnsent, At: t0, RetryAt: later, Error: "connection refused"})
		if got := e.claimFor("app", "o", later.Add(-time.Second), 1); len(got) != 0 {
			t.Errorf("claimed %v before its RetryAt", ids(got))
		}
		pairs, err := e.s.Deliveries(ctx, "job_1")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pairs {
			if p.Destination == "app" && (p.Attempts != 0 || p.LastError != "connection refused" || !p.NextAttemptAt.Equal(later)) {
				t.Errorf("given back for an outage: %+v, want no attempt, the error, due at %v", p, later)
			}
		}
		since := time.UnixMilli(t0.Add(-time.Minute).UnixMilli())
		if err := e.s.SetDown(ctx, "app", t0.Add(-time.Hour), "first"); err != nil {
			t.Fatal(err)
		}
		if err := e.s.SetDown(ctx, "app", since, "dial tcp: connection refused"); err != nil {
			t.Fatalf("down again: %v", err)
		}
		if err := e.s.SetDown(ctx, "gone", since, "x"); err != nil {
			t.Fatal(err)
		}
		down, err := e.s.DownDestinations(ctx)
		if err != nil || len(down) != 2 || down[0].Name != "app" || !down[0].Since.Equal(since) || down[0].Cause != "dial tcp: connection refused" {
			t.Fatalf("down = %+v, %v, want app since %v and gone", down, err, since)
		}
		st, err := e.s.Destinations(ctx, t0)
		if err != nil {
			t.Fatal(err)
		}
		state := map[string]inbox.DestinationStats{}
		for _, d := range st {
			state[d.Name] = d
		}
		if a := state["app"]; a.State != inbox.DestinationDown || !a.DownSince.Equal(since) || a.ByStatus[inbox.StatusNew] != 1 {
			t.Errorf("app = %+v, want down with its new row", a)
		}
		if a := state["audit"]; a.State != inbox.DestinationUp {
			t.Errorf("audit = %+v, want up", a)
		}
		if g, ok := state["gone"]; !ok || g.State != inbox.DestinationDown {
			t.Errorf("gone = %+v, want down though it has no pair", g)
		}
		if err := e.s.SetPaused(ctx, "app", true); err != nil {
			t.Fatal(err)
		}
		if st, _ := e.s.Destinations(ctx, t0); st[0].Name != "app" || st[0].State != inbox.DestinationPaused {
			t.Errorf("paused and down = %+v, want paused", st[0])
		}
		if got := e.claimFor("app", "o", t0, 10); len(got) != 0 {
			t.Errorf("a paused destination claimed %v while down", ids(got))
		}
		for _, name := range []string{"app", "gone", "never"} {
			if err := e.s.SetDown(ctx, name, time.Time{}, ""); err != nil {
				t.Fatalf("up %s: %v", name, err)
			}
		}
		if down, err := e.s.DownDestinations(ctx); err != nil || len(down) != 0 {
			t.Errorf("down after up = %+v, %v", down, err)
		}
	})

	t.Run("purge deletes the pairs with the row", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		e.put(job("job_1"))
		at := t0.Add(time.Second)
		j := e.claimFor("audit", "o", at, 1)
		e.settle("o", at, inbox.Settlement{Job: j[0], Fate: inbox.FateDone, At: at})
		if len(e.pairs("job_1")) != 2 {
			t.Fatalf("pairs = %v, want app and audit", e.pairs("job_1"))
		}
		j = e.claimFor("app", "o", at, 1)
		e.settle("o", at, inbox.Settlement{Job: j[0], Fate: inbox.FateDone, At: at})
		e.clock.Set(at.Add(inbox.MinRetention + time.Hour))
		rep, err := e.s.Purge(context.Background(), inbox.PurgeSelection{Statuses: []inbox.Status{inbox.StatusDone}, Before: at.Add(time.Minute)})
		if err != nil {
			t.Fatalf("purge: %v (%+v)", err, rep)
		}
		if !e.gone("job_1") || len(e.pairs("job_1")) != 0 {
			t.Errorf("after purge: row gone %v, pairs %v", e.gone("job_1"), e.pairs("job_1"))
		}
	})
}
