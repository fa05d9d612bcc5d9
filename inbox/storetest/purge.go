package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"inbox/inbox"
)

func runPurge(t *testing.T, o opener) {
	ctx := context.Background()

	t.Run("in batches", func(t *testing.T) {
		// More rows than one transaction deletes.
		old := time.Now().Add(-48 * time.Hour).Truncate(time.Millisecond)
		e := o.at(t, old)
		const n = 2500
		bodies := make([]string, n)
		for i := range bodies {
			bodies[i] = fmt.Sprintf(`{"event":"webhook.test","request_id":"req_%d"}`, i)
		}
		e.putAll(append(bodies, jobBody("job_1"))...)
		statuses := []inbox.Status{inbox.StatusDone, inbox.StatusIgnored}
		before := time.Now().Add(-24 * time.Hour)
		want, err := e.s.Purgeable(ctx, before, statuses)
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.s.Purge(ctx, before, statuses)
		if err != nil {
			t.Fatal(err)
		}
		if got.Deleted[inbox.StatusIgnored] != n || want.Deleted[inbox.StatusIgnored] != n {
			t.Errorf("purged %v, counted %v beforehand; want %d ignored", got, want, n)
		}
		st := e.stats()
		if st.ByStatus[inbox.StatusIgnored] != 0 || st.ByStatus[inbox.StatusNew] != 1 {
			t.Errorf("left %v, want only the new row", st.ByStatus)
		}
	})

	t.Run("refuses new and unknown statuses", func(t *testing.T) {
		e := o.at(t, time.Now().Add(-48*time.Hour))
		e.put(job("job_1"))
		for _, statuses := range [][]inbox.Status{{inbox.StatusNew}, {inbox.StatusDone, inbox.StatusNew}, {"lost"}} {
			if _, err := e.s.Purge(ctx, time.Now(), statuses); err == nil {
				t.Errorf("Purge(%v): no error", statuses)
			}
			if _, err := e.s.Purgeable(ctx, time.Now(), statuses); err == nil {
				t.Errorf("Purgeable(%v): no error", statuses)
			}
		}
		if e.gone("job_1") {
			t.Error("the new row is gone")
		}
	})

	t.Run("retention counts from the last delivery", func(t *testing.T) {
		e := o.fresh(t)
		e.put(classify(`not json`))
		e.put(classify(`still not json`))
		e.clock.Add(10 * 24 * time.Hour)
		e.put(classify(`still not json`)) // a repeat today keeps it
		rep, err := e.s.Purge(ctx, t0.Add(24*time.Hour), []inbox.Status{inbox.StatusParked})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Deleted[inbox.StatusParked] != 1 || !e.gone(inbox.BodyKey(sha(`not json`))) || e.gone(inbox.BodyKey(sha(`still not json`))) {
			t.Errorf("report %+v, want only the row not seen since", rep)
		}
	})

	t.Run("a done row stays while a parked row of its job does", func(t *testing.T) {
		e := o.fresh(t)
		e.queued("job_1", "job_2")
		for _, j := range e.claim("a", t0, time.Minute, 2) {
			e.settle("a", t0, inbox.Settlement{Job: j, Fate: inbox.FateDone, At: t0})
		}
		failed := `{"event":"job.failed","job_id":"job_1","status":"ERROR"}`
		e.put(classify(failed)) // parked conflict beside the done job_1
		cutoff := t0.Add(time.Hour)

		done := []inbox.Status{inbox.StatusDone}
		counted, err := e.s.Purgeable(ctx, cutoff, done)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := e.s.Purge(ctx, cutoff, done)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Deleted[inbox.StatusDone] != 1 || rep.KeptDone != 1 || counted.Deleted[inbox.StatusDone] != 1 || counted.KeptDone != 1 {
			t.Errorf("purge done: %+v (counted %+v), want job_2 deleted and job_1 kept", rep, counted)
		}
		if e.gone("job_1") || !e.gone("job_2") {
			t.Error("want job_1 kept and job_2 gone")
		}
		both := []inbox.Status{inbox.StatusDone, inbox.StatusParked}
		rep, err = e.s.Purge(ctx, cutoff, both)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Deleted[inbox.StatusDone] != 1 || rep.Deleted[inbox.StatusParked] != 1 || rep.KeptDone != 0 {
			t.Errorf("purge done and parked: %+v, want the parked row and then its done row", rep)
		}
		if c, err := e.s.CountByStatus(ctx); err != nil || c[inbox.StatusDone]+c[inbox.StatusParked] != 0 {
			t.Errorf("left %v %v", c, err)
		}
	})

	t.Run("a parked row seen lately keeps its done row", func(t *testing.T) {
		e := o.fresh(t)
		e.queued("job_1")
		j := e.claim("a", t0, time.Minute, 1)[0]
		e.settle("a", t0, inbox.Settlement{Job: j, Fate: inbox.FateDone, At: t0})
		e.clock.Set(t0.Add(48 * time.Hour))
		e.put(classify(`{"event":"job.failed","job_id":"job_1","status":"ERROR"}`))
		rep, err := e.s.Purge(ctx, t0.Add(24*time.Hour), []inbox.Status{inbox.StatusDone, inbox.StatusParked})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Deleted[inbox.StatusDone] != 0 || rep.Deleted[inbox.StatusParked] != 0 || rep.KeptDone != 1 || e.gone("job_1") {
			t.Errorf("report %+v, want the done row kept beside the recent parked row", rep)
		}
	})
}
