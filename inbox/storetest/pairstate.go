package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"inbox/inbox"
)

// parkedTwice stores n job.failed rows job_p0.. that destination failures
// parks handler_failed, then audit handler_rejected a second later (the
// row holds audit's reason, settled last), app took them; job_w, parked
// handler_failed by failures while audit still has it; job_d, done
// everywhere; and a row parked unparseable on receipt. It returns the
// ids of the n rows, when failures parked them, and the unparseable
// row's id.
func (e *env) parkedTwice(n int) (twice []string, at time.Time, unparseable string) {
	e.t.Helper()
	for i := range n {
		id := fmt.Sprintf("job_p%d", i)
		e.put(failed(id))
		twice = append(twice, id)
	}
	e.put(failed("job_w"))
	e.put(failed("job_d"))
	unparseable = e.put(classify(`not json`)).ID
	at = t0.Add(time.Second)
	park := func(dest string, at time.Time, reason inbox.Reason, ids ...string) {
		var st []inbox.Settlement
		for _, j := range e.claimFor(dest, "o", at, 100) {
			switch {
			case slices.Contains(ids, j.ID):
				st = append(st, inbox.Settlement{Job: j, Fate: inbox.FatePark, At: at, Reason: reason, Error: "HTTP 5xx"})
			case dest != "audit" || j.ID != "job_w":
				st = append(st, inbox.Settlement{Job: j, Fate: inbox.FateDone, At: at})
			}
		}
		e.settle("o", at, st...)
	}
	park("app", at, "")
	park("failures", at, inbox.ReasonHandlerFailed, append(slices.Clone(twice), "job_w")...)
	park("audit", at.Add(time.Second), inbox.ReasonHandlerRejected, twice...)
	for _, id := range twice {
		if r := e.get(id); r.Status != inbox.StatusParked || r.Reason != inbox.ReasonHandlerRejected {
			e.t.Fatalf("%s = %s %s, want parked handler_rejected (audit's, settled last)", id, r.Status, r.Reason)
		}
	}
	if r := e.get("job_w"); r.Status != inbox.StatusNew {
		e.t.Fatalf("job_w = %s, want new while audit has it", r.Status)
	}
	if r := e.get("job_d"); r.Status != inbox.StatusDone {
		e.t.Fatalf("job_d = %s, want done", r.Status)
	}
	return twice, at, unparseable
}

// listIDs returns the ids List gives for f, sorted, after checking that
// Count counts as many.
func (e *env) listIDs(f inbox.Filter) []string {
	e.t.Helper()
	rows, err := e.s.List(context.Background(), f)
	if err != nil {
		e.t.Fatalf("list %+v: %v", f, err)
	}
	var out []string
	for _, r := range rows {
		out = append(out, r.ID)
	}
	if n, err := e.s.Count(context.Background(), f); err != nil || n != int64(len(out)) {
		e.t.Errorf("count %+v = %d, %v; list gave %d", f, n, err, len(out))
	}
	slices.Sort(out)
	return out
}

// runPairState checks that selections by status parked and by reason see
// each (row, destination) pair's own state: a reason one destination
// parked a row with is found though another's settled later.
func runPairState(t *testing.T, o opener) {
	t.Run("list and count by each pair's reason", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		twice, _, unparseable := e.parkedTwice(6)
		withW := sorted(twice, "job_w")
		tests := []struct {
			name string
			f    inbox.Filter
			want []string
		}{
			{"reason of the pair settled first", inbox.Filter{Reason: inbox.ReasonHandlerFailed}, withW},
			{"parked with it", inbox.Filter{Status: inbox.StatusParked, Reason: inbox.ReasonHandlerFailed}, withW},
			{"reason of the pair settled last", inbox.Filter{Reason: inbox.ReasonHandlerRejected}, twice},
			{"parked, anywhere", inbox.Filter{Status: inbox.StatusParked}, sorted(twice, "job_w", unparseable)},
			{"parked on receipt", inbox.Filter{Status: inbox.StatusParked, Reason: inbox.ReasonUnparseable}, []string{unparseable}},
			{"the row's own status new", inbox.Filter{Status: inbox.StatusNew}, []string{"job_w"}},
			{"new, with a pair parked", inbox.Filter{Status: inbox.StatusNew, Reason: inbox.ReasonHandlerFailed}, []string{"job_w"}},
			{"done rows have no parked pair", inbox.Filter{Status: inbox.StatusDone, Reason: inbox.ReasonHandlerFailed}, nil},
			{"at the destination that parked it", inbox.Filter{Destination: "failures", Reason: inbox.ReasonHandlerFailed}, withW},
			{"parked there, with it", inbox.Filter{Destination: "failures", Status: inbox.StatusParked, Reason: inbox.ReasonHandlerFailed}, withW},
			{"parked there", inbox.Filter{Destination: "failures", Status: inbox.StatusParked}, withW},
			{"not at the other", inbox.Filter{Destination: "audit", Reason: inbox.ReasonHandlerFailed}, nil},
			{"the other's own", inbox.Filter{Destination: "audit", Status: inbox.StatusParked, Reason: inbox.ReasonHandlerRejected}, twice},
			{"new there", inbox.Filter{Destination: "audit", Status: inbox.StatusNew}, []string{"job_w"}},
			{"done there, the row parked", inbox.Filter{Destination: "app", Status: inbox.StatusDone}, sorted(twice, "job_w", "job_d")},
			{"parked nowhere there", inbox.Filter{Destination: "app", Status: inbox.StatusParked}, nil},
			{"with another filter", inbox.Filter{Reason: inbox.ReasonHandlerFailed, Since: t0, Event: "job.failed"}, withW},
		}
		for _, tt := range tests {
			if got := e.listIDs(tt.f); !slices.Equal(got, tt.want) {
				t.Errorf("%s: %+v listed %v, want %v", tt.name, tt.f, got, tt.want)
			}
		}
	})

	t.Run("counts per reason and per hour by each pair's reason", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		_, at, _ := e.parkedTwice(6)
		ctx := context.Background()
		byReason := func(f inbox.Filter) string {
			t.Helper()
			groups, err := e.s.ParkedByReason(ctx, f)
			if err != nil {
				t.Fatalf("parked by reason %+v: %v", f, err)
			}
			out := ""
			for _, g := range groups {
				out += fmt.Sprintf("%s:%d ", g.Reason, g.Count)
				if !g.Oldest.Equal(t0) {
					t.Errorf("%+v: %s oldest %s, want %s", f, g.Reason, g.Oldest, t0)
				}
			}
			return out
		}
		for f, want := range map[inbox.Filter]string{
			{}:                                     "handler_failed:7 handler_rejected:6 unparseable:1 ",
			{Reason: inbox.ReasonHandlerFailed}:    "handler_failed:7 ",
			{Reason: inbox.ReasonHandlerRejected}:  "handler_rejected:6 ",
			{Destination: "failures"}:              "handler_failed:7 ",
			{Destination: "audit"}:                 "handler_rejected:6 ",
			{Destination: "app"}:                   "",
			{Source: "gh"}:                         "",
			{Reason: inbox.ReasonUnparseable}:      "unparseable:1 ",
			{Destination: "failures", Event: "no"}: "",
		} {
			if got := byReason(f); got != want {
				t.Errorf("parked by reason %+v = %q, want %q", f, got, want)
			}
		}
		end := at.Truncate(time.Hour).Add(time.Hour)
		for f, want := range map[inbox.Filter]int64{
			{Reason: inbox.ReasonHandlerFailed}:   7,
			{Reason: inbox.ReasonHandlerRejected}: 6,
			{Destination: "failures"}:             7,
			{}:                                    8,
		} {
			hours, err := e.s.ParkedPerHour(ctx, f, end, 2)
			if err != nil {
				t.Fatalf("parked per hour %+v: %v", f, err)
			}
			if len(hours) != 2 || hours[1].Count != want || hours[0].Count != 0 {
				t.Errorf("parked per hour %+v = %+v, want %d in the last hour", f, hours, want)
			}
		}
	})

	t.Run("replay and reprocess by the reason of one destination", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		twice, at, _ := e.parkedTwice(6)
		later := at.Add(time.Minute)
		e.clock.Set(later)
		rep := e.reprocess(inbox.Selection{Reason: inbox.ReasonHandlerFailed}, sume(rules.Events...), true)
		if rep.Moved != 6 {
			t.Errorf("reprocess --reason handler_failed --dry-run = %+v, want the 6 parked rows moved", rep)
		}
		sel := inbox.ReplaySelection{Filter: inbox.Filter{Status: inbox.StatusParked, Reason: inbox.ReasonHandlerFailed, Destination: "failures"}}
		r := e.replay(sel, inbox.ReplayOptions{})
		if r.Rows != 7 || r.Pairs != 7 {
			t.Fatalf("replay = %+v, want 7 rows, each with its pair for failures", r)
		}
		for _, id := range twice {
			if p := e.pairing(id, "failures"); p.Status != inbox.StatusNew {
				t.Errorf("%s's pair for failures = %s, want new", id, p.Status)
			}
			if p := e.pairing(id, "audit"); p.Status != inbox.StatusParked || p.Reason != inbox.ReasonHandlerRejected {
				t.Errorf("%s's pair for audit = %s %s, want still parked handler_rejected", id, p.Status, p.Reason)
			}
		}
	})
}

// sorted returns list with ids, in order.
func sorted(list []string, ids ...string) []string {
	out := append(slices.Clone(list), ids...)
	slices.Sort(out)
	return out
}
