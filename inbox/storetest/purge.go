package storetest

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"inbox/inbox"
)

var settledStatuses = []inbox.Status{inbox.StatusDone, inbox.StatusIgnored}

// purged runs Purgeable and then Purge on sel, fails the test on an error
// from either, and returns both reports.
func (e *env) purged(sel inbox.PurgeSelection) (counted, deleted inbox.PurgeReport) {
	e.t.Helper()
	counted, err := e.s.Purgeable(context.Background(), sel)
	if err != nil {
		e.t.Fatalf("purgeable %+v: %v", sel, err)
	}
	deleted, err = e.s.Purge(context.Background(), sel)
	if err != nil {
		e.t.Fatalf("purge %+v: %v", sel, err)
	}
	return counted, deleted
}

// status is the row's status and reason, or "gone".
func (e *env) status(id string) string {
	e.t.Helper()
	if e.gone(id) {
		return "gone"
	}
	r := e.get(id)
	return string(r.Status) + " " + string(r.Reason)
}

func runPurge(t *testing.T, o opener) {
	ctx := context.Background()

	t.Run("in batches", func(t *testing.T) {
		t.Parallel()
		// More rows than one transaction deletes.
		e := o.fresh(t)
		const n = 2500
		bodies := make([]string, n)
		for i := range bodies {
			bodies[i] = fmt.Sprintf(`{"event":"webhook.test","request_id":"req_%d"}`, i)
		}
		e.putAll(append(bodies, jobBody("job_1"))...)
		e.clock.Add(10 * 24 * time.Hour)
		want, got := e.purged(inbox.PurgeSelection{Before: t0.Add(2 * 24 * time.Hour), Statuses: settledStatuses})
		if got.Deleted[inbox.StatusIgnored] != n || want.Deleted[inbox.StatusIgnored] != n {
			t.Errorf("purged %v, counted %v beforehand; want %d ignored", got.Deleted, want.Deleted, n)
		}
		if got.KeptUnfinished != 1 || want.KeptUnfinished != 1 {
			t.Errorf("kept unfinished %d (counted %d beforehand), want the new row", got.KeptUnfinished, want.KeptUnfinished)
		}
		st := e.stats()
		if st.ByStatus[inbox.StatusIgnored] != 0 || st.ByStatus[inbox.StatusNew] != 1 {
			t.Errorf("left %v, want only the new row", st.ByStatus)
		}
	})

	t.Run("refuses", func(t *testing.T) {
		t.Parallel()
		// New rows, parked rows by status, unknown statuses and reasons,
		// and a retention under MinRetention (on the store's clock), by
		// Purge and Purgeable alike.
		e := o.fresh(t)
		e.putAll(jobBody("job_1"), `{"event":"webhook.test","request_id":"req_1"}`, `not json`)
		now := t0.Add(30 * 24 * time.Hour)
		e.clock.Set(now)
		longAgo := now.Add(-inbox.MinRetention - time.Minute)
		for _, sel := range []inbox.PurgeSelection{
			{Before: longAgo, Statuses: []inbox.Status{inbox.StatusNew}},
			{Before: longAgo, Statuses: []inbox.Status{inbox.StatusDone, inbox.StatusNew}},
			{Before: longAgo, Statuses: []inbox.Status{inbox.StatusParked}},
			{Before: longAgo, Statuses: []inbox.Status{"lost"}},
			{Before: longAgo, Reasons: []inbox.Reason{"lost"}},
			{Before: longAgo, Reasons: []inbox.Reason{inbox.ReasonUnparseable, ""}},
			{Before: now, Statuses: settledStatuses},
			{Before: now.Add(time.Hour), Statuses: settledStatuses},
			{Before: now.Add(-inbox.MinRetention + time.Minute), Statuses: settledStatuses, Reasons: inbox.ReceiptReasons()},
		} {
			if _, err := e.s.Purge(ctx, sel); err == nil {
				t.Errorf("Purge(%+v): no error", sel)
			}
			if _, err := e.s.Purgeable(ctx, sel); err == nil {
				t.Errorf("Purgeable(%+v): no error", sel)
			}
		}
		st := e.stats()
		if st.ByStatus[inbox.StatusNew] != 1 || st.ByStatus[inbox.StatusIgnored] != 1 || st.ByStatus[inbox.StatusParked] != 1 {
			t.Errorf("left %v, want every row", st.ByStatus)
		}
		// Exactly MinRetention is allowed.
		if _, err := e.s.Purge(ctx, inbox.PurgeSelection{Before: now.Add(-inbox.MinRetention), Statuses: settledStatuses}); err != nil {
			t.Errorf("purge at exactly the minimum retention: %v", err)
		}
	})

	t.Run("keeps unfinished work", func(t *testing.T) {
		t.Parallel()
		// New rows, waiting or claimed, and rows the dispatcher parked
		// stay past any retention until their reason is named.
		e := o.fresh(t)
		e.queued("job_failed", "job_rejected", "job_flight", "job_waiting")
		e.put(classify(exploded("job_poison")))
		e.put(classify(`{"event":"webhook.test","request_id":"req_1"}`))
		jobs := e.claim("d1", t0.Add(time.Second), time.Hour, 3)
		if len(jobs) != 3 {
			t.Fatalf("claimed %v, want three", ids(jobs))
		}
		var settle []inbox.Settlement
		for _, j := range jobs {
			switch j.ID {
			case "job_failed":
				settle = append(settle, inbox.Settlement{Job: j, Fate: inbox.FatePark, At: t0.Add(time.Second), Reason: inbox.ReasonHandlerFailed, Error: "500"})
			case "job_rejected":
				settle = append(settle, inbox.Settlement{Job: j, Fate: inbox.FatePark, At: t0.Add(time.Second), Reason: inbox.ReasonHandlerRejected, Error: "410"})
			}
		}
		// job_flight stays claimed: still unfinished.
		if stale := e.settle("d1", t0.Add(time.Second), settle...); stale != 0 {
			t.Fatalf("%d settlements stale", stale)
		}
		e.clock.Set(t0.Add(40 * 24 * time.Hour))
		sel := inbox.PurgeSelection{Before: t0.Add(10 * 24 * time.Hour), Statuses: settledStatuses, Reasons: inbox.ReceiptReasons()}
		dry, rep := e.purged(sel)
		for _, r := range []inbox.PurgeReport{dry, rep} {
			if r.Deleted[inbox.StatusParked] != 1 || r.DeletedParked[inbox.ReasonUnknownEvent] != 1 || r.Deleted[inbox.StatusIgnored] != 1 || r.KeptUnfinished != 4 {
				t.Errorf("receipt reasons: report %+v, want the poison and ignored rows deleted, 4 kept", r)
			}
		}
		for id, want := range map[string]string{"job_failed": "parked handler_failed", "job_rejected": "parked handler_rejected",
			"job_waiting": "new ", "job_flight": "new ", "job_poison": "gone"} {
			if got := e.status(id); got != want {
				t.Errorf("after purging receipt reasons, %s is %q, want %q", id, got, want)
			}
		}

		sel.Reasons = []inbox.Reason{inbox.ReasonHandlerFailed}
		dry, rep = e.purged(sel)
		for _, r := range []inbox.PurgeReport{dry, rep} {
			if r.DeletedParked[inbox.ReasonHandlerFailed] != 1 || r.KeptUnfinished != 3 {
				t.Errorf("named handler_failed: report %+v, want it deleted and 3 kept", r)
			}
		}
		if got := e.status("job_failed"); got != "gone" {
			t.Errorf("job_failed is %q after it was named, want gone", got)
		}
		if got := e.status("job_rejected"); got != "parked handler_rejected" {
			t.Errorf("job_rejected is %q, want kept: not named", got)
		}
	})

	t.Run("parked rows by the reasons named", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		e.put(classify(`not json`))
		e.put(classify(`[2]`))
		e.put(classify(exploded("job_x")))
		e.put(classify(`{"event":"job.completed","status":"COMPLETED"}`))
		e.clock.Add(30 * 24 * time.Hour)
		sel := inbox.PurgeSelection{Before: t0.Add(time.Hour), Reasons: []inbox.Reason{inbox.ReasonUnparseable, inbox.ReasonTooLarge}}
		dry, rep := e.purged(sel)
		want := map[inbox.Reason]int64{inbox.ReasonUnparseable: 2, inbox.ReasonTooLarge: 0}
		for _, r := range []inbox.PurgeReport{dry, rep} {
			if !maps.Equal(r.DeletedParked, want) || r.Deleted[inbox.StatusParked] != 2 || len(r.Deleted) != 1 {
				t.Errorf("report %+v, want %v and nothing else", r, want)
			}
		}
		if st := e.stats(); st.ByReason[inbox.ReasonUnknownEvent] != 1 || st.ByReason[inbox.ReasonMissingJobID] != 1 || st.ByReason[inbox.ReasonUnparseable] != 0 {
			t.Errorf("left %v, want the reasons not named", st.ByReason)
		}
	})

	t.Run("retention counts from the last delivery", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		e.put(classify(`not json`))
		e.put(classify(`still not json`))
		e.clock.Add(10 * 24 * time.Hour)
		e.put(classify(`still not json`)) // a repeat today keeps it
		e.clock.Add(10 * 24 * time.Hour)
		_, rep := e.purged(inbox.PurgeSelection{Before: t0.Add(24 * time.Hour), Reasons: []inbox.Reason{inbox.ReasonUnparseable}})
		if rep.Deleted[inbox.StatusParked] != 1 || !e.gone(inbox.BodyKey(sha(`not json`))) || e.gone(inbox.BodyKey(sha(`still not json`))) {
			t.Errorf("report %+v, want only the row not seen since", rep)
		}
	})

	t.Run("a done row stays while a parked row of its job does", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		e.queued("job_1", "job_2")
		for _, j := range e.claim("a", t0, time.Minute, 2) {
			e.settle("a", t0, inbox.Settlement{Job: j, Fate: inbox.FateDone, At: t0})
		}
		failed := `{"event":"job.failed","job_id":"job_1","status":"ERROR"}`
		e.put(classify(failed)) // parked conflict beside the done job_1
		e.clock.Add(30 * 24 * time.Hour)
		cutoff := t0.Add(time.Hour)

		done := []inbox.Status{inbox.StatusDone}
		counted, rep := e.purged(inbox.PurgeSelection{Before: cutoff, Statuses: done})
		if rep.Deleted[inbox.StatusDone] != 1 || rep.KeptDone != 1 || counted.Deleted[inbox.StatusDone] != 1 || counted.KeptDone != 1 {
			t.Errorf("purge done: %+v (counted %+v), want job_2 deleted and job_1 kept", rep, counted)
		}
		if e.gone("job_1") || !e.gone("job_2") {
			t.Error("want job_1 kept and job_2 gone")
		}
		// Another reason named: the conflict stays, and so does job_1.
		counted, rep = e.purged(inbox.PurgeSelection{Before: cutoff, Statuses: done, Reasons: []inbox.Reason{inbox.ReasonUnparseable}})
		if rep.Deleted[inbox.StatusDone] != 0 || rep.KeptDone != 1 || counted.Deleted[inbox.StatusDone] != 0 || counted.KeptDone != 1 || e.gone("job_1") {
			t.Errorf("purge done and unparseable: %+v (counted %+v), want job_1 kept", rep, counted)
		}
		counted, rep = e.purged(inbox.PurgeSelection{Before: cutoff, Statuses: done, Reasons: []inbox.Reason{inbox.ReasonConflict}})
		if counted.Deleted[inbox.StatusDone] != 1 || counted.DeletedParked[inbox.ReasonConflict] != 1 || counted.KeptDone != 0 {
			t.Errorf("purgeable done and conflicts: %+v, want the parked row and its done row", counted)
		}
		if rep.Deleted[inbox.StatusDone] != 1 || rep.DeletedParked[inbox.ReasonConflict] != 1 || rep.KeptDone != 0 {
			t.Errorf("purge done and conflicts: %+v, want the parked row and then its done row", rep)
		}
		if c, err := e.s.CountByStatus(ctx); err != nil || c[inbox.StatusDone]+c[inbox.StatusParked] != 0 {
			t.Errorf("left %v %v", c, err)
		}
	})

	t.Run("a parked row seen lately keeps its done row", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		e.queued("job_1")
		j := e.claim("a", t0, time.Minute, 1)[0]
		e.settle("a", t0, inbox.Settlement{Job: j, Fate: inbox.FateDone, At: t0})
		e.clock.Set(t0.Add(20 * 24 * time.Hour))
		e.put(classify(`{"event":"job.failed","job_id":"job_1","status":"ERROR"}`))
		e.clock.Add(10 * 24 * time.Hour)
		_, rep := e.purged(inbox.PurgeSelection{Before: t0.Add(10 * 24 * time.Hour), Statuses: settledStatuses, Reasons: inbox.Reasons()})
		if rep.Deleted[inbox.StatusDone] != 0 || rep.Deleted[inbox.StatusParked] != 0 || rep.KeptDone != 1 || e.gone("job_1") {
			t.Errorf("report %+v, want the done row kept beside the recent parked row", rep)
		}
	})
}
