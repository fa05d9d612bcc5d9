package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"inbox/inbox"
)

// failed is a job.failed body, which every destination of routes takes.
func failed(id string) inbox.Delivery {
	return classify(fmt.Sprintf(`{"event":"job.failed","job_id":%q,"status":"ERROR"}`, id))
}

// deliverAll claims the pairs of every destination of routes at at and
// settles each done.
func (e *env) deliverAll(at time.Time) {
	e.t.Helper()
	for _, r := range routes {
		var done []inbox.Settlement
		for _, j := range e.claimFor(r.Name, "o", at, 1000) {
			done = append(done, inbox.Settlement{Job: j, Fate: inbox.FateDone, At: at})
		}
		if len(done) > 0 {
			e.settle("o", at, done...)
		}
	}
}

// replay runs Replay at the clock's time.
func (e *env) replay(sel inbox.ReplaySelection, opts inbox.ReplayOptions) inbox.ReplayReport {
	e.t.Helper()
	rep, err := e.s.Replay(context.Background(), sel, opts)
	if err != nil {
		e.t.Fatalf("replay: %v", err)
	}
	return rep
}

// pairing returns the row id's pair with dest.
func (e *env) pairing(id, dest string) inbox.Pairing {
	e.t.Helper()
	ds, err := e.s.Deliveries(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, d := range ds {
		if d.Destination == dest {
			return d
		}
	}
	e.t.Fatalf("%s has no pair with %s", id, dest)
	return inbox.Pairing{}
}

// pairsSnapshot is every pair of the rows, with their earlier series.
func (e *env) pairsSnapshot(ids ...string) string {
	e.t.Helper()
	var b strings.Builder
	for _, id := range ids {
		ds, err := e.s.Deliveries(context.Background(), id)
		if err != nil {
			e.t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %+v\n", id, ds)
	}
	return b.String()
}

func runReplay(t *testing.T, o opener) {
	t.Run("done pairs are handed on again, the old series kept", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		e.put(job("job_1"))
		e.put(failed("job_2"))
		at := t0.Add(time.Second)
		e.deliverAll(at)
		if r := e.get("job_2"); r.Status != inbox.StatusDone {
			t.Fatalf("job_2 = %s before the replay, want done", r.Status)
		}
		later := at.Add(time.Minute)
		e.clock.Set(later)
		rep := e.replay(inbox.ReplaySelection{Filter: inbox.Filter{Event: "job.failed"}}, inbox.ReplayOptions{Sample: 5})
		if rep.Rows != 1 || rep.Pairs != 3 || rep.Waiting != 0 || len(rep.First) != 1 || rep.First[0].ID != "job_2" || !rep.LastDue.Equal(later) {
			t.Fatalf("replay = %+v, want job_2's 3 pairs due at %s", rep, later)
		}
		r := e.get("job_2")
		if r.Status != inbox.StatusNew || r.Reason != "" || !r.DoneAt.IsZero() || r.Attempts != 0 || !r.NextAttemptAt.Equal(later) {
			t.Errorf("replayed row = %s attempts %d next %s done %s, want new, due at %s", r.Status, r.Attempts, r.NextAttemptAt, r.DoneAt, later)
		}
		if r := e.get("job_1"); r.Status != inbox.StatusDone {
			t.Errorf("job_1, another event, is %s", r.Status)
		}
		for _, dest := range []string{"app", "failures", "audit"} {
			p := e.pairing("job_2", dest)
			if p.Status != inbox.StatusNew || p.Attempts != 0 || !p.DoneAt.IsZero() || len(p.Earlier) != 1 {
				t.Fatalf("%s's pair = %+v, want new with one earlier series", dest, p)
			}
			h := p.Earlier[0]
			if h.N != 1 || h.Status != inbox.StatusDone || h.Attempts != 1 || !h.DoneAt.Equal(at) || !h.ReplayedAt.Equal(later) {
				t.Errorf("%s's earlier series = %+v, want series 1: 1 attempt, done at %s, replayed at %s", dest, h, at, later)
			}
		}
		got := e.claimFor("failures", "o", later, 10)
		if !slices.Equal(ids(got), []string{"job_2#1"}) {
			t.Fatalf("failures claimed %v after the replay, want job_2 at attempt 1", ids(got))
		}
		e.settle("o", later, inbox.Settlement{Job: got[0], Fate: inbox.FatePark, At: later, Reason: inbox.ReasonHandlerRejected, Error: "HTTP 422"})
		e.deliverAll(later)
		if r := e.get("job_2"); r.Status != inbox.StatusParked || r.Reason != inbox.ReasonHandlerRejected {
			t.Errorf("job_2 after the second series = %s %s, want parked handler_rejected", r.Status, r.Reason)
		}
		// A second replay keeps a second series: parked this time.
		last := later.Add(time.Minute)
		e.clock.Set(last)
		if rep := e.replay(inbox.ReplaySelection{IDs: []string{"job_2"}}, inbox.ReplayOptions{}); rep.Rows != 1 || rep.Pairs != 3 {
			t.Fatalf("second replay = %+v", rep)
		}
		if r := e.get("job_2"); r.Status != inbox.StatusNew || r.LastError != "" {
			t.Errorf("row replayed again = %s, last error %q, want new with none", r.Status, r.LastError)
		}
		h := e.pairing("job_2", "failures").Earlier
		if len(h) != 2 || h[1].N != 2 || h[1].Status != inbox.StatusParked || h[1].Reason != inbox.ReasonHandlerRejected || h[1].LastError != "HTTP 422" {
			t.Errorf("failures' series after two replays = %+v, want series 2 parked handler_rejected", h)
		}
	})

	t.Run("a pair whose destination no longer takes the row is left", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		e.put(failed("job_2"))
		at := t0.Add(time.Second)
		e.deliverAll(at)
		e.clock.Set(at.Add(time.Minute))
		// failures narrowed to job.completed since job_2 was routed;
		// audit is no longer configured: no dispatcher would take a
		// pair made new for it.
		routes := []inbox.Route{{Name: "app"}, {Name: "failures", Events: []string{"job.completed"}}}
		rep := e.replay(inbox.ReplaySelection{IDs: []string{"job_2"}}, inbox.ReplayOptions{Routes: routes})
		if rep.Rows != 1 || rep.Pairs != 1 || rep.Filtered != 2 {
			t.Fatalf("replay = %+v, want 1 pair made new and 2 filtered", rep)
		}
		for _, dest := range []string{"failures", "audit"} {
			if p := e.pairing("job_2", dest); p.Status != inbox.StatusDone || len(p.Earlier) != 0 {
				t.Errorf("%s's pair = %+v, want still done, with no earlier series", dest, p)
			}
		}
		if p := e.pairing("job_2", "app"); p.Status != inbox.StatusNew {
			t.Errorf("app's pair = %s, want new", p.Status)
		}
	})

	t.Run("a destination configured later gets the missing pairs its filters take", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		e.put(job("job_1"))
		e.put(failed("job_2"))
		e.put(keyed("vibe", "run_1", "run.done", []byte(`{"id":"run_1"}`), deliveryTS, inbox.Rules{MaxBody: 1 << 20}))
		at := t0.Add(time.Second)
		e.deliverAll(at)
		e.clock.Set(at.Add(time.Minute))
		// newc takes the sume rows; app already has them.
		now := append(slices.Clone(routes), inbox.Route{Name: "newc", Sources: []string{inbox.DefaultSource}})
		sel := inbox.ReplaySelection{Filter: inbox.Filter{Destination: "newc", Since: t0}}
		dry := e.replay(sel, inbox.ReplayOptions{Routes: now, DryRun: true})
		if dry.Added != 2 || dry.Rows != 2 || dry.Pairs != 0 {
			t.Fatalf("dry run = %+v, want 2 pairs to add on 2 rows", dry)
		}
		if p := e.pairs("job_1"); slices.Contains(p, "newc:new") {
			t.Fatalf("dry run made a pair: %v", p)
		}
		// Without the destination in Routes, nothing is routed to it.
		if rep := e.replay(sel, inbox.ReplayOptions{}); rep.Rows != 0 || rep.Added != 0 {
			t.Fatalf("replay without newc configured = %+v, want nothing", rep)
		}
		rep := e.replay(sel, inbox.ReplayOptions{Routes: now})
		if rep.Added != 2 || rep.Rows != 2 {
			t.Fatalf("replay = %+v, want 2 pairs added", rep)
		}
		if p := e.pairs("job_2"); !slices.Equal(p, []string{"app:done", "audit:done", "failures:done", "newc:new"}) {
			t.Errorf("job_2's pairs = %v, want newc's new beside the done ones", p)
		}
		if p := e.pairs("run_1"); slices.Contains(p, "newc:new") {
			t.Errorf("run_1 (vibe) got a newc pair: %v", p)
		}
		if r := e.get("job_1"); r.Status != inbox.StatusNew {
			t.Errorf("job_1 = %s, want new for newc", r.Status)
		}
		claimAt := at.Add(time.Minute)
		got, _, err := e.s.Settle(context.Background(), "o", nil,
			inbox.Claim{Now: claimAt, Until: claimAt.Add(time.Minute), Max: 10, Destination: "newc", Routes: now})
		if err != nil || len(got) != 2 {
			t.Errorf("newc claimed %v, %v, want job_1 and job_2", ids(got), err)
		}
		// Again, missing only: each row has its pair now.
		rep = e.replay(sel, inbox.ReplayOptions{Routes: now, MissingOnly: true})
		if rep.Added != 0 || rep.Present != 2 || rep.Pairs != 0 {
			t.Errorf("missing-only replay = %+v, want 2 present and nothing made", rep)
		}
		// The rows are new (newc's pairs wait), app's pairs done: a status
		// selects by the destination's pair where the row has one.
		done := inbox.ReplaySelection{Filter: inbox.Filter{Destination: "app", Status: inbox.StatusDone, Since: t0}}
		if rep := e.replay(done, inbox.ReplayOptions{Routes: now, DryRun: true}); rep.Pairs != 2 || rep.Added != 0 {
			t.Errorf("replay of app's done pairs = %+v, want job_1's and job_2's", rep)
		}
	})

	t.Run("a destination's pair alone, of the rows routed to it", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		e.put(job("job_1"))
		e.put(failed("job_2"))
		e.put(keyed("vibe", "run_1", "run.done", []byte(`{"id":"run_1"}`), deliveryTS, inbox.Rules{MaxBody: 1 << 20}))
		at := t0.Add(time.Second)
		e.deliverAll(at)
		listed, err := e.s.List(context.Background(), inbox.Filter{Destination: "failures"})
		if err != nil || len(listed) != 1 || listed[0].ID != "job_2" {
			t.Fatalf("list --destination failures = %v, %v, want job_2 alone", listed, err)
		}
		if n, err := e.s.Count(context.Background(), inbox.Filter{Destination: "app", Status: inbox.StatusDone}); err != nil || n != 2 {
			t.Errorf("count of app's done rows = %d, %v, want 2", n, err)
		}
		e.clock.Set(at.Add(time.Minute))
		rep := e.replay(inbox.ReplaySelection{Filter: inbox.Filter{Destination: "failures", Since: t0}}, inbox.ReplayOptions{})
		if rep.Rows != 1 || rep.Pairs != 1 {
			t.Fatalf("replay for failures = %+v, want job_2's one pair", rep)
		}
		if p := e.pairs("job_2"); !slices.Equal(p, []string{"app:done", "audit:done", "failures:new"}) {
			t.Errorf("job_2's pairs = %v, want only failures' new", p)
		}
		for _, dest := range []string{"app", "audit"} {
			if got := e.claimFor(dest, "o", at.Add(time.Minute), 10); len(got) != 0 {
				t.Errorf("%s claimed %v after a replay for failures alone", dest, ids(got))
			}
		}
		if r := e.get("job_1"); r.Status != inbox.StatusDone {
			t.Errorf("job_1, not routed to failures, is %s", r.Status)
		}
	})

	t.Run("a row selected as parked: only its parked pairs", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		e.put(failed("job_2"))
		at := t0.Add(time.Second)
		got := e.claimFor("failures", "o", at, 10)
		if len(got) != 1 {
			t.Fatalf("failures claimed %v, want job_2", ids(got))
		}
		e.settle("o", at, inbox.Settlement{Job: got[0], Fate: inbox.FatePark, At: at, Reason: inbox.ReasonHandlerRejected, Error: "HTTP 422"})
		e.deliverAll(at)
		if r := e.get("job_2"); r.Status != inbox.StatusParked {
			t.Fatalf("job_2 = %s, want parked at failures and done elsewhere", r.Status)
		}
		later := at.Add(time.Minute)
		e.clock.Set(later)
		for _, f := range []inbox.Filter{{Status: inbox.StatusParked}, {Reason: inbox.ReasonHandlerRejected}} {
			e.clock.Set(later)
			rep := e.replay(inbox.ReplaySelection{Filter: f}, inbox.ReplayOptions{})
			if rep.Rows != 1 || rep.Pairs != 1 {
				t.Fatalf("replay %+v = %+v, want job_2's parked pair alone", f, rep)
			}
			if p := e.pairing("job_2", "failures"); p.Status != inbox.StatusNew || len(p.Earlier) == 0 {
				t.Errorf("failures' pair after replay %+v = %+v, want new with its earlier series", f, p)
			}
			for _, dest := range []string{"app", "audit"} {
				if p := e.pairing("job_2", dest); p.Status != inbox.StatusDone || len(p.Earlier) != 0 {
					t.Errorf("%s, which took job_2, after replay %+v = %+v, want done, not handed it again", dest, f, p)
				}
			}
			got := e.claimFor("failures", "o", later, 10)
			if len(got) != 1 {
				t.Fatalf("failures claimed %v after the replay, want job_2", ids(got))
			}
			e.settle("o", later, inbox.Settlement{Job: got[0], Fate: inbox.FatePark, At: later, Reason: inbox.ReasonHandlerRejected, Error: "HTTP 422"})
			if r := e.get("job_2"); r.Status != inbox.StatusParked || r.Reason != inbox.ReasonHandlerRejected {
				t.Fatalf("job_2 parked again at failures = %s %s, want parked handler_rejected", r.Status, r.Reason)
			}
			later = later.Add(time.Minute)
		}
	})

	t.Run("paced", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		var all, bodies []string
		for i := range 520 {
			all = append(all, fmt.Sprintf("job_%03d", i))
			bodies = append(bodies, jobBody(all[i]))
		}
		// All received at one time: taken by id among them.
		e.putAll(bodies...)
		at := t0.Add(time.Minute)
		e.deliverAll(at)
		start := at.Add(time.Minute)
		e.clock.Set(start)
		// 520 rows: more than one transaction takes.
		rep := e.replay(inbox.ReplaySelection{Filter: inbox.Filter{Destination: "app"}}, inbox.ReplayOptions{Rate: 100})
		if rep.Rows != 520 || rep.Pairs != 520 || !rep.FirstDue.Equal(start) || !rep.LastDue.Equal(start.Add(5190*time.Millisecond)) {
			t.Fatalf("replay = rows %d pairs %d due %s to %s, want 520 from %s, 10ms apart", rep.Rows, rep.Pairs, rep.FirstDue, rep.LastDue, start)
		}
		for i, id := range all {
			want := start.Add(time.Duration(i) * 10 * time.Millisecond)
			if p := e.pairing(id, "app"); !p.NextAttemptAt.Equal(want) {
				t.Fatalf("%s due at %s, want %s (oldest first, 10ms apart)", id, p.NextAttemptAt, want)
			}
		}
		if got := e.claimFor("app", "o", start.Add(25*time.Millisecond), 1000); !slices.Equal(ids(got), []string{"job_000#1", "job_001#1", "job_002#1"}) {
			t.Errorf("claimed %v 25ms in, want the first three", ids(got))
		}
	})

	t.Run("what waits, what is skipped", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		e.put(job("job_1"))
		e.put(failed("job_2"))
		at := t0.Add(time.Second)
		e.deliverAll(at)
		e.put(job("job_3")) // not routed yet
		e.put(classify(`not json`))
		e.put(classify(`{"event":"job.exploded","job_id":"job_4"}`))
		e.put(classify(`{"event":"webhook.test","request_id":"req_1"}`))
		later := at.Add(time.Minute)
		e.clock.Set(later)
		inFlight := e.claimFor("app", "o", later, 10)
		if !slices.Equal(ids(inFlight), []string{"job_3#1"}) {
			t.Fatalf("claimed %v, want job_3 (routed by this claim)", ids(inFlight))
		}
		rep := e.replay(inbox.ReplaySelection{Filter: inbox.Filter{Since: t0}}, inbox.ReplayOptions{})
		want := map[string]int{"unparseable": 1, "unknown_event": 1, "ignored": 1}
		if rep.Rows != 2 || rep.Pairs != 5 || rep.Waiting != 2 || !sameCounts(rep.Skipped, want) {
			t.Errorf("replay = %+v, want job_1 and job_2 handed on (5 pairs), job_3's 2 pairs waiting (one in flight), 3 rows skipped", rep)
		}
		if p := e.pairing("job_3", "app"); p.LeaseOwner != "o" || len(p.Earlier) != 0 {
			t.Errorf("job_3's pair in flight = %+v, want left alone", p)
		}
	})

	t.Run("a done row no destination took is routed again", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		e.put(keyed("vibe", "run_1", "run.done", []byte(`{"id":"run_1"}`), deliveryTS, inbox.Rules{MaxBody: 1 << 20}))
		at := t0.Add(time.Second)
		e.clock.Set(at)
		only := []inbox.Route{{Name: "app", Sources: []string{inbox.DefaultSource}}}
		if _, _, err := e.s.Settle(context.Background(), "o", nil, inbox.Claim{Now: at, Until: at.Add(time.Minute), Max: 5, Destination: "app", Routes: only}); err != nil {
			t.Fatal(err)
		}
		if r := e.get("vibe/run_1"); r.Status != inbox.StatusDone {
			t.Fatalf("row = %s, want done", r.Status)
		}
		rep := e.replay(inbox.ReplaySelection{IDs: []string{"vibe/run_1"}}, inbox.ReplayOptions{})
		if rep.Rows != 1 || rep.Rerouted != 1 || rep.Pairs != 0 {
			t.Fatalf("replay = %+v, want the row routed again", rep)
		}
		if got := ids(e.claimFor("audit", "o", at, 10)); !slices.Equal(got, []string{"vibe/run_1#1"}) {
			t.Errorf("audit claimed %v, want the row routed to it now", got)
		}
	})

	t.Run("dry run changes nothing and counts what a run does", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		e.put(job("job_1"))
		e.put(failed("job_2"))
		e.deliverAll(t0.Add(time.Second))
		e.clock.Set(t0.Add(time.Minute))
		before, pairs := e.snapshot(), e.pairsSnapshot("job_1", "job_2")
		sel := inbox.ReplaySelection{Filter: inbox.Filter{Status: inbox.StatusDone}}
		dry := e.replay(sel, inbox.ReplayOptions{DryRun: true, Rate: 1, Sample: 1})
		if got := e.snapshot(); got != before {
			t.Errorf("dry run changed the rows:\n%s\nwant\n%s", got, before)
		}
		if got := e.pairsSnapshot("job_1", "job_2"); got != pairs {
			t.Errorf("dry run changed the pairs:\n%s\nwant\n%s", got, pairs)
		}
		if !dry.DryRun || dry.Rows != 2 || dry.Pairs != 5 || len(dry.First) != 1 || dry.First[0].ID != "job_1" {
			t.Errorf("dry run = %+v, want 2 rows, 5 pairs, job_1 listed", dry)
		}
		real := e.replay(sel, inbox.ReplayOptions{Rate: 1, Sample: 1})
		real.DryRun = true
		sameJSON(t, "the real run's report", real, dry)
	})

	t.Run("a purged row's history goes with it", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		e.put(job("job_1"))
		e.deliverAll(t0)
		e.replay(inbox.ReplaySelection{IDs: []string{"job_1"}}, inbox.ReplayOptions{})
		e.deliverAll(t0)
		if h := e.pairing("job_1", "app").Earlier; len(h) != 1 {
			t.Fatalf("earlier series = %+v, want one", h)
		}
		later := t0.Add(30 * 24 * time.Hour)
		e.clock.Set(later)
		if _, got := e.purged(inbox.PurgeSelection{Before: t0.Add(time.Hour), Statuses: []inbox.Status{inbox.StatusDone}}); got.Deleted[inbox.StatusDone] != 1 {
			t.Fatalf("purged %v, want job_1", got.Deleted)
		}
		// The key delivered again is a new row: it has no earlier series.
		e.put(job("job_1"))
		e.deliverAll(later)
		if h := e.pairing("job_1", "app").Earlier; len(h) != 0 {
			t.Errorf("the new row of a purged key has the old row's series %+v", h)
		}
	})

	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		e.put(job("job_1"))
		before := e.snapshot()
		for name, sel := range map[string]inbox.ReplaySelection{
			"no selection":   {},
			"limit only":     {Filter: inbox.Filter{Limit: 10}},
			"bodies":         {Filter: inbox.Filter{Contains: "job"}},
			"an unknown row": {IDs: []string{"job_1", "job_9"}},
		} {
			if _, err := e.s.Replay(context.Background(), sel, inbox.ReplayOptions{}); err == nil {
				t.Errorf("%s: replay took it", name)
			}
		}
		if _, err := e.s.Replay(context.Background(), inbox.ReplaySelection{IDs: []string{"job_1"}}, inbox.ReplayOptions{Rate: -1}); err == nil {
			t.Error("a negative rate was taken")
		}
		if got := e.snapshot(); got != before {
			t.Errorf("a refused replay changed the rows")
		}
	})
}

// sameCounts reports whether a and b hold the same counts.
func sameCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
