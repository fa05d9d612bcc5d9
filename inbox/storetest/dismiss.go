package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"inbox/inbox"
)

// ops is who the suite's dismissals are made by.
const ops = "ops"

// dismiss runs Dismiss at the clock's time, failing the test on an error.
func (e *env) dismiss(sel inbox.DismissSelection, note string, dryRun bool) inbox.DismissReport {
	e.t.Helper()
	rep, err := e.s.Dismiss(context.Background(), sel, inbox.DismissOptions{
		Dismissal: inbox.Dismissal{By: ops, Note: note}, DryRun: dryRun, Sample: 10})
	if err != nil {
		e.t.Fatalf("dismiss %+v: %v", sel, err)
	}
	return rep
}

// parkedCounts are what the parked counts (and the alerts, which read
// them) find: rows per reason, and rows parked per hour in the day to at.
func (e *env) parkedCounts(at time.Time) (map[inbox.Reason]int64, int64) {
	e.t.Helper()
	ctx := context.Background()
	groups, err := e.s.ParkedByReason(ctx, inbox.Filter{})
	if err != nil {
		e.t.Fatal(err)
	}
	by := map[inbox.Reason]int64{}
	for _, g := range groups {
		by[g.Reason] = g.Count
	}
	hours, err := e.s.ParkedPerHour(ctx, inbox.Filter{}, at, 24)
	if err != nil {
		e.t.Fatal(err)
	}
	var n int64
	for _, h := range hours {
		n += h.Count
	}
	return by, n
}

func runDismiss(t *testing.T, o opener) {
	ctx := context.Background()

	t.Run("parked rows dismissed by id: counts, lists, who, when and why", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		e.put(classify(exploded("job_x")))
		odd := e.put(classify(`not json`)).ID
		e.put(job("job_1"))
		before := e.get("job_x")
		at := t0.Add(time.Hour)
		e.clock.Set(at)

		rep := e.dismiss(inbox.DismissSelection{IDs: []string{"job_x", odd, "job_1", "job_nope", "job_x"}}, "test events", false)
		if rep.Rows != 2 || rep.Pairs != 0 || rep.Waiting != 0 || rep.Changed != 0 ||
			!slices.Equal(rep.Missing, []string{"job_nope"}) || !slices.Equal(rep.NotParked, []string{"job_1"}) || rep.Refused() != 2 {
			t.Fatalf("dismiss = %+v, want 2 rows dismissed, job_nope missing, job_1 not parked", rep)
		}
		r := e.get("job_x")
		if r.Status != inbox.StatusDismissed || r.Reason != inbox.ReasonUnknownEvent || string(r.Body) != string(before.Body) ||
			r.SHA256 != before.SHA256 || !r.UpdatedAt.Equal(at) {
			t.Errorf("job_x = %s %s updated %s, want dismissed unknown_event, its body kept, updated at %s", r.Status, r.Reason, r.UpdatedAt, at)
		}
		if !r.DismissedAt.Equal(at) || r.DismissedBy != ops || r.DismissNote != "test events" {
			t.Errorf("job_x's dismissal = %s by %q: %q, want %s by %q: %q", r.DismissedAt, r.DismissedBy, r.DismissNote, at, ops, "test events")
		}
		if r := e.get("job_1"); r.Status != inbox.StatusNew || !r.DismissedAt.IsZero() || r.DismissedBy != "" {
			t.Errorf("job_1, not parked, = %s dismissed %s by %q, want new and no dismissal", r.Status, r.DismissedAt, r.DismissedBy)
		}

		st := e.stats()
		if st.ByStatus[inbox.StatusParked] != 0 || st.ByStatus[inbox.StatusDismissed] != 2 || st.ByStatus[inbox.StatusNew] != 1 || len(st.ByReason) != 0 {
			t.Errorf("stats = %v, parked by reason %v; want 2 dismissed, none parked", st.ByStatus, st.ByReason)
		}
		counts, err := e.s.CountByStatus(ctx)
		if err != nil || counts[inbox.StatusDismissed] != 2 || counts[inbox.StatusParked] != 0 {
			t.Errorf("count by status = %v, %v; want 2 dismissed", counts, err)
		}
		if by, n := e.parkedCounts(at); len(by) != 0 || n != 0 {
			t.Errorf("parked counts = %v, %d per hour; want none", by, n)
		}
		for _, tt := range []struct {
			f    inbox.Filter
			want []string
		}{
			{inbox.Filter{Status: inbox.StatusDismissed}, sorted([]string{"job_x"}, odd)},
			{inbox.Filter{Status: inbox.StatusDismissed, Reason: inbox.ReasonUnknownEvent}, []string{"job_x"}},
			{inbox.Filter{Status: inbox.StatusParked}, nil},
			{inbox.Filter{Reason: inbox.ReasonUnknownEvent}, nil},
		} {
			if got := e.listIDs(tt.f); !slices.Equal(got, tt.want) {
				t.Errorf("list %+v = %v, want %v", tt.f, got, tt.want)
			}
		}

		// Dismissed already: not parked, so said and left as it is.
		if rep := e.dismiss(inbox.DismissSelection{IDs: []string{"job_x"}}, "again", false); rep.Rows != 0 || !slices.Equal(rep.NotParked, []string{"job_x"}) {
			t.Errorf("dismissing job_x again = %+v, want it not parked", rep)
		}
		if r := e.get("job_x"); r.DismissNote != "test events" {
			t.Errorf("job_x's note = %q after a second dismiss, want the first", r.DismissNote)
		}
	})

	t.Run("a dry run and a selection by filter", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		e.put(classify(exploded("job_a")))
		e.clock.Add(time.Minute)
		e.put(classify(exploded("job_b")))
		e.put(classify(`{"event":"job.other","job_id":"job_c"}`))
		snap := e.snapshot()
		dry := e.dismiss(inbox.DismissSelection{Filter: inbox.Filter{Event: "job.exploded"}}, "dry", true)
		if !dry.DryRun || dry.Rows != 2 || len(dry.First) != 2 || dry.First[0].ID != "job_a" || dry.First[0].Status != inbox.StatusParked {
			t.Fatalf("dry run = %+v, want 2 rows, job_a first as it was", dry)
		}
		if got := e.snapshot(); got != snap {
			t.Errorf("the dry run changed the rows:\n%s\nwant\n%s", got, snap)
		}
		rep := e.dismiss(inbox.DismissSelection{Filter: inbox.Filter{Event: "job.exploded", Since: t0.Add(time.Second)}}, "real", false)
		if rep.Rows != 1 || e.get("job_b").Status != inbox.StatusDismissed || e.get("job_a").Status != inbox.StatusParked {
			t.Errorf("dismiss since = %+v, job_a %s, job_b %s; want job_b alone dismissed", rep, e.get("job_a").Status, e.get("job_b").Status)
		}
		for _, tt := range []struct {
			name string
			sel  inbox.DismissSelection
			note string
		}{
			{"no selection", inbox.DismissSelection{}, "note"},
			{"a limit alone", inbox.DismissSelection{Filter: inbox.Filter{Limit: 5}}, "note"},
			{"another status", inbox.DismissSelection{Filter: inbox.Filter{Status: inbox.StatusDone, Event: "job.exploded"}}, "note"},
			{"a body search", inbox.DismissSelection{Filter: inbox.Filter{Contains: "job"}}, "note"},
			{"no note", inbox.DismissSelection{IDs: []string{"job_a"}}, " "},
		} {
			snap := e.snapshot()
			if _, err := e.s.Dismiss(ctx, tt.sel, inbox.DismissOptions{Dismissal: inbox.Dismissal{By: ops, Note: tt.note}}); err == nil {
				t.Errorf("%s: dismissed, want refused", tt.name)
			}
			if got := e.snapshot(); got != snap {
				t.Errorf("%s: refused, yet changed the rows", tt.name)
			}
		}
	})

	t.Run("a later delivery lands on a dismissed row as on the parked one", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		e.put(classify(exploded("job_x")))
		e.put(classify(exploded("job_y")))
		e.put(classify(`not json`))
		odd := e.put(classify(`not json`)).ID
		e.dismiss(inbox.DismissSelection{IDs: []string{"job_x", "job_y", odd}}, "tests", false)
		e.clock.Add(time.Minute)

		// The same bytes: counted on it, still dismissed, its dismissal kept.
		for _, id := range []string{"job_x", odd} {
			var body string
			if id == odd {
				body = `not json`
			} else {
				body = exploded(id)
			}
			if res := e.put(classify(body)); res.Outcome != inbox.OutcomeDuplicate || res.ID != id {
				t.Errorf("repeat of %s = %+v, want a duplicate on it", id, res)
			}
			r := e.get(id)
			if r.Status != inbox.StatusDismissed || r.Deliveries != 3-btoi(id == "job_x") || r.DismissNote != "tests" || !r.LastSeenAt.Equal(e.clock.Now()) {
				t.Errorf("%s after a repeat = %s, %d deliveries, note %q, last seen %s; want dismissed, counted", id, r.Status, r.Deliveries, r.DismissNote, r.LastSeenAt)
			}
		}
		// A storable delivery of the job takes the row over, as it would
		// the parked row: the job is work now.
		if res := e.put(job("job_y")); res.Outcome != inbox.OutcomeRevived {
			t.Fatalf("job_y's storable delivery = %s, want revived", res.Outcome)
		}
		r := e.get("job_y")
		if r.Status != inbox.StatusNew || r.Reason != "" || !r.DismissedAt.IsZero() || r.DismissedBy != "" || r.DismissNote != "" {
			t.Errorf("revived job_y = %s %s dismissed %s by %q: %q, want new, its dismissal cleared", r.Status, r.Reason, r.DismissedAt, r.DismissedBy, r.DismissNote)
		}
		// Another event of job_x lands beside it, parked, as beside the
		// parked row.
		if res := e.put(classify(`{"event":"job.weird","job_id":"job_x"}`)); res.Outcome != inbox.OutcomeParked || res.ID == "job_x" {
			t.Errorf("another event of job_x = %+v, want parked beside it", res)
		}
		if r := e.get("job_x"); r.Status != inbox.StatusDismissed {
			t.Errorf("job_x = %s, want still dismissed", r.Status)
		}
	})

	t.Run("parked pairs dismissed leave every parked count", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		twice, at, odd := e.parkedTwice(2)
		later := at.Add(time.Hour)
		e.clock.Set(later)
		if by, _ := e.parkedCounts(later); by[inbox.ReasonHandlerFailed] != 3 || by[inbox.ReasonHandlerRejected] != 2 || by[inbox.ReasonUnparseable] != 1 {
			t.Fatalf("parked counts before = %v", by)
		}

		// Only failures' pairs: the rows stay parked by audit, job_w new.
		rep := e.dismiss(inbox.DismissSelection{Filter: inbox.Filter{Destination: "failures"}}, "failures never needed these", false)
		if rep.Rows != 0 || rep.Pairs != 3 || rep.Waiting != 3 {
			t.Fatalf("dismiss at failures = %+v, want 3 pairs, 3 rows still waiting", rep)
		}
		for _, id := range twice {
			r := e.get(id)
			if r.Status != inbox.StatusParked || r.Reason != inbox.ReasonHandlerRejected || !r.DismissedAt.Equal(later) {
				t.Errorf("%s = %s %s dismissed %s, want parked handler_rejected (audit's), the dismissal recorded", id, r.Status, r.Reason, r.DismissedAt)
			}
			if p := e.pairing(id, "failures"); p.Status != inbox.StatusDismissed || p.Reason != inbox.ReasonHandlerFailed {
				t.Errorf("%s's failures pair = %s %s, want dismissed handler_failed", id, p.Status, p.Reason)
			}
		}
		by, _ := e.parkedCounts(later)
		if by[inbox.ReasonHandlerFailed] != 0 || by[inbox.ReasonHandlerRejected] != 2 || by[inbox.ReasonUnparseable] != 1 {
			t.Errorf("parked counts after failures' = %v, want no handler_failed", by)
		}
		if got := e.listIDs(inbox.Filter{Reason: inbox.ReasonHandlerFailed}); len(got) != 0 {
			t.Errorf("listed by handler_failed: %v, want none", got)
		}
		if got := e.listIDs(inbox.Filter{Destination: "failures", Status: inbox.StatusDismissed}); !slices.Equal(got, sorted(twice, "job_w")) {
			t.Errorf("dismissed at failures: %v", got)
		}

		// Then the rest, by reason: the rows are dismissed now.
		rep = e.dismiss(inbox.DismissSelection{Filter: inbox.Filter{Reason: inbox.ReasonHandlerRejected}}, "audit too", false)
		if rep.Rows != 2 || rep.Pairs != 2 || rep.Waiting != 0 {
			t.Fatalf("dismiss handler_rejected = %+v, want 2 rows, 2 pairs", rep)
		}
		for _, id := range twice {
			if r := e.get(id); r.Status != inbox.StatusDismissed || r.Reason != inbox.ReasonHandlerRejected || r.DismissNote != "audit too" {
				t.Errorf("%s = %s %s %q, want dismissed handler_rejected, the latest note", id, r.Status, r.Reason, r.DismissNote)
			}
		}
		by, n := e.parkedCounts(later)
		if len(by) != 1 || by[inbox.ReasonUnparseable] != 1 || n != 1 {
			t.Errorf("parked counts = %v, %d per hour; want the unparseable row alone", by, n)
		}
		if got := e.listIDs(inbox.Filter{Status: inbox.StatusParked}); !slices.Equal(got, []string{odd}) {
			t.Errorf("parked rows: %v, want %s alone", got, odd)
		}
		dests, err := e.s.Destinations(ctx, later)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range dests {
			if d.ByStatus[inbox.StatusParked] != 0 {
				t.Errorf("destination %s counts %d parked pairs, want none", d.Name, d.ByStatus[inbox.StatusParked])
			}
		}

		// job_w, new for audit: once audit takes it, it is done.
		var done []inbox.Settlement
		for _, j := range e.claimFor("audit", "o", later, 10) {
			done = append(done, inbox.Settlement{Job: j, Fate: inbox.FateDone, At: later})
		}
		e.settle("o", later, done...)
		if r := e.get("job_w"); r.Status != inbox.StatusDone {
			t.Errorf("job_w = %s once audit took it, want done", r.Status)
		}

		// A repeat of a dismissed row's job is counted on it.
		if res := e.put(failed(twice[0])); res.Outcome != inbox.OutcomeDuplicate {
			t.Errorf("repeat of %s = %s, want duplicate", twice[0], res.Outcome)
		}
		if r := e.get(twice[0]); r.Status != inbox.StatusDismissed || r.Deliveries != 2 {
			t.Errorf("%s after a repeat = %s, %d deliveries; want dismissed, 2", twice[0], r.Status, r.Deliveries)
		}

		// Replay by status dismissed resets the dismissed pairs alone, and
		// keeps their series; by id, every pair.
		rep2 := e.replay(inbox.ReplaySelection{IDs: []string{twice[0]}, Filter: inbox.Filter{Status: inbox.StatusDismissed}}, inbox.ReplayOptions{})
		if rep2.Rows != 1 || rep2.Pairs != 2 {
			t.Fatalf("replay of dismissed %s = %+v, want its 2 dismissed pairs", twice[0], rep2)
		}
		r := e.get(twice[0])
		if r.Status != inbox.StatusNew || !r.DismissedAt.IsZero() || r.DismissNote != "" {
			t.Errorf("replayed %s = %s, dismissed %s %q; want new, the dismissal cleared", twice[0], r.Status, r.DismissedAt, r.DismissNote)
		}
		if p := e.pairing(twice[0], "app"); p.Status != inbox.StatusDone {
			t.Errorf("%s's app pair = %s, want done still", twice[0], p.Status)
		}
		if p := e.pairing(twice[0], "audit"); p.Status != inbox.StatusNew || len(p.Earlier) != 1 || p.Earlier[0].Status != inbox.StatusDismissed ||
			p.Earlier[0].Reason != inbox.ReasonHandlerRejected {
			t.Errorf("%s's audit pair = %+v, want new, its dismissed series kept", twice[0], p)
		}
		if rep := e.replay(inbox.ReplaySelection{IDs: []string{twice[1]}}, inbox.ReplayOptions{}); rep.Rows != 1 || rep.Pairs != 3 {
			t.Errorf("replay of %s = %+v, want its 3 pairs", twice[1], rep)
		}
	})

	t.Run("reprocess brings a dismissed row back, by id only", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		e.put(classify(exploded("job_x")))
		e.put(classify(exploded("job_y")))
		e.put(classify(exploded("job_z")))
		e.dismiss(inbox.DismissSelection{Filter: inbox.Filter{Event: "job.exploded"}}, "tests", false)
		if rep := e.reprocess(inbox.Selection{All: true}, sume("job.exploded"), false); rep.Moved != 0 {
			t.Errorf("reprocess all = %+v, want dismissed rows passed over", rep)
		}
		if r := e.get("job_x"); r.Status != inbox.StatusDismissed {
			t.Errorf("job_x after reprocess all = %s, want still dismissed", r.Status)
		}
		// Still not storable: parked again, its dismissal cleared.
		if rep := e.reprocess(inbox.Selection{IDs: []string{"job_x"}}, sume("job.completed"), false); rep.Parked[inbox.ReasonUnknownEvent] != 1 {
			t.Errorf("reprocess job_x = %+v, want parked unknown_event", rep)
		}
		if r := e.get("job_x"); r.Status != inbox.StatusParked || r.Reason != inbox.ReasonUnknownEvent || !r.DismissedAt.IsZero() || r.DismissedBy != "" {
			t.Errorf("job_x = %s %s dismissed %s by %q, want parked again, no dismissal", r.Status, r.Reason, r.DismissedAt, r.DismissedBy)
		}
		// Storable now: new.
		if rep := e.reprocess(inbox.Selection{IDs: []string{"job_y"}}, sume("job.exploded"), false); rep.Moved != 1 {
			t.Errorf("reprocess job_y = %+v, want moved", rep)
		}
		if r := e.get("job_y"); r.Status != inbox.StatusNew || r.DismissNote != "" {
			t.Errorf("job_y = %s note %q, want new, no dismissal", r.Status, r.DismissNote)
		}
		if r := e.get("job_z"); r.Status != inbox.StatusDismissed {
			t.Errorf("job_z, not named, = %s", r.Status)
		}
	})

	t.Run("purge takes dismissed rows past the retention only", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		e.put(classify(exploded("job_old")))
		e.put(job("job_d"))
		e.put(classify(exploded("job_d"))) // parked conflict beside job_d
		beside := inbox.BodyKey(sha(exploded("job_d")))
		e.clock.Add(20 * 24 * time.Hour)
		e.put(classify(exploded("job_recent")))
		e.dismiss(inbox.DismissSelection{IDs: []string{"job_old", beside, "job_recent"}}, "tests", false)
		now := e.clock.Now()
		var done []inbox.Settlement
		for _, j := range e.claim("o", now, time.Minute, 10) {
			done = append(done, inbox.Settlement{Job: j, Fate: inbox.FateDone, At: now})
		}
		e.settle("o", now, done...)
		if r := e.get("job_d"); r.Status != inbox.StatusDone {
			t.Fatalf("job_d = %s, want done", r.Status)
		}
		e.clock.Add(20 * 24 * time.Hour)
		cutoff := t0.Add(10 * 24 * time.Hour)

		// Without dismissed rows selected, the done row beside one stays.
		counted, got := e.purged(inbox.PurgeSelection{Before: cutoff, Statuses: settledStatuses})
		if got.Deleted[inbox.StatusDone] != 0 || got.KeptDone != 1 || counted.KeptDone != 1 || e.gone("job_old") {
			t.Errorf("purge without dismissed = %+v (counted %+v), want job_d kept beside its dismissed row, job_old kept", got, counted)
		}
		all := append(slices.Clone(settledStatuses), inbox.StatusDismissed)
		counted, got = e.purged(inbox.PurgeSelection{Before: cutoff, Statuses: all})
		if got.Deleted[inbox.StatusDismissed] != 2 || counted.Deleted[inbox.StatusDismissed] != 2 || got.Deleted[inbox.StatusDone] != 1 ||
			counted.Deleted[inbox.StatusDone] != 1 || got.KeptDone != 0 {
			t.Errorf("purge with dismissed = %+v (counted %+v), want 2 dismissed rows, then job_d they kept", got, counted)
		}
		if !e.gone("job_old") || !e.gone(beside) || !e.gone("job_d") || e.gone("job_recent") {
			t.Errorf("job_old %s, %s %s, job_d %s, job_recent %s; want the old three gone, the recent one kept",
				e.status("job_old"), beside, e.status(beside), e.status("job_d"), e.status("job_recent"))
		}
	})
}

func btoi(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
