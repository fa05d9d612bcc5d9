package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"inbox/inbox"
)

func runRead(t *testing.T, o opener) {
	ctx := context.Background()

	t.Run("get a missing row", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		if _, err := e.s.Get(ctx, "job_404"); !errors.Is(err, inbox.ErrNotFound) {
			t.Errorf("get a missing row: %v, want ErrNotFound", err)
		}
	})

	// filled holds, a minute apart: job_1 new, not json parked
	// unparseable, a test ping ignored, job_x parked unknown_event, gh/d1
	// new, job_2 new.
	filled := func(t *testing.T) *env {
		e := o.fresh(t)
		for _, d := range []inbox.Delivery{
			job("job_1"), classify(`not json`), classify(`{"event":"webhook.test"}`),
			classify(`{"event":"job.exploded","job_id":"job_x"}`),
			keyed("gh", "d1", "push", []byte(`{}`), 1, inbox.Rules{}), job("job_2"),
		} {
			e.put(d)
			e.clock.Add(time.Minute)
		}
		e.put(job("job_1"))
		return e
	}
	list := func(t *testing.T, e *env, f inbox.Filter) []string {
		t.Helper()
		rows, err := e.s.List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rows {
			if r.Body != nil {
				t.Errorf("list returned the body of %s", r.ID)
			}
			out = append(out, r.ID)
		}
		return out
	}

	t.Run("list", func(t *testing.T) {
		t.Parallel()
		e := filled(t)
		unparseable := inbox.BodyKey(sha(`not json`))
		for _, tt := range []struct {
			name string
			f    inbox.Filter
			want []string
		}{
			{"everything, newest first", inbox.Filter{}, []string{"job_2", "gh/d1", "job_x", inbox.BodyKey(sha(`{"event":"webhook.test"}`)), unparseable, "job_1"}},
			{"limit", inbox.Filter{Limit: 2}, []string{"job_2", "gh/d1"}},
			{"status", inbox.Filter{Status: inbox.StatusNew}, []string{"job_2", "gh/d1", "job_1"}},
			{"reason", inbox.Filter{Reason: inbox.ReasonUnparseable}, []string{unparseable}},
			{"parked", inbox.Filter{Status: inbox.StatusParked}, []string{"job_x", unparseable}},
			{"source", inbox.Filter{Source: "gh"}, []string{"gh/d1"}},
			{"since and before", inbox.Filter{Since: t0.Add(time.Minute), Before: t0.Add(3 * time.Minute)},
				[]string{inbox.BodyKey(sha(`{"event":"webhook.test"}`)), unparseable}},
		} {
			if got := list(t, e, tt.f); !slices.Equal(got, tt.want) {
				t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
			}
		}
	})

	// find: the filters an operator looks for one event with. Bodies hold
	// LIKE's wildcards, NUL and bytes that are not UTF-8, which a search
	// must match as bytes.
	t.Run("find", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		hostile := "\xff\xfe\x00needle\x00"
		for _, d := range []inbox.Delivery{
			classify(`{"event":"job.completed","job_id":"job_a","status":"COMPLETED","payload":{"note":"50% off_now \\ ok"}}`),
			classify(`{"event":"job.failed","job_id":"job_b","status":"ERROR","payload":{"note":"50X offXnow"}}`),
			classify(hostile),
			keyed("gh", "d1", "push", []byte(`{"msg":"needle"}`), 1, inbox.Rules{}),
			job("job_c"),
		} {
			e.put(d)
			e.clock.Add(time.Minute)
		}
		unparseable := inbox.BodyKey(sha(hostile))
		for _, tt := range []struct {
			name string
			f    inbox.Filter
			want []string
		}{
			{"event", inbox.Filter{Event: "job.failed"}, []string{"job_b"}},
			{"event of another source", inbox.Filter{Event: "push"}, []string{"gh/d1"}},
			{"job status", inbox.Filter{JobStatus: "ERROR"}, []string{"job_b"}},
			{"job status completed", inbox.Filter{JobStatus: "COMPLETED"}, []string{"job_c", "job_a"}},
			{"job status is exact", inbox.Filter{JobStatus: "error"}, nil},
			{"event and since", inbox.Filter{Event: "job.completed", Since: t0.Add(time.Minute)}, []string{"job_c"}},
			{"contains", inbox.Filter{Contains: "needle"}, []string{"gh/d1", unparseable}},
			{"contains and source", inbox.Filter{Contains: "needle", Source: "gh"}, []string{"gh/d1"}},
			{"contains and limit", inbox.Filter{Contains: "needle", Limit: 1}, []string{"gh/d1"}},
			{"contains is case-sensitive", inbox.Filter{Contains: "NEEDLE"}, nil},
			{"percent is a byte", inbox.Filter{Contains: "50%"}, []string{"job_a"}},
			{"a lone percent", inbox.Filter{Contains: "%"}, []string{"job_a"}},
			{"underscore is a byte", inbox.Filter{Contains: "off_now"}, []string{"job_a"}},
			{"backslash is a byte", inbox.Filter{Contains: `\`}, []string{"job_a"}},
			{"NUL", inbox.Filter{Contains: "\x00needle\x00"}, []string{unparseable}},
			{"not UTF-8", inbox.Filter{Contains: "\xff\xfe"}, []string{unparseable}},
			{"nothing", inbox.Filter{Contains: "haystack"}, nil},
			{"newest row scanned", inbox.Filter{Contains: "needle", ScanLimit: 1}, nil},
			{"newest two scanned", inbox.Filter{Contains: "needle", ScanLimit: 2}, []string{"gh/d1"}},
			{"scan after the other filters", inbox.Filter{Contains: "needle", Status: inbox.StatusParked, ScanLimit: 1}, []string{unparseable}},
		} {
			if got := list(t, e, tt.f); !slices.Equal(got, tt.want) {
				t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
			}
		}
		for _, tt := range []struct {
			name string
			f    inbox.Filter
			want int64
		}{
			{"contains", inbox.Filter{Contains: "needle", Limit: 1}, 2},
			{"contains, bounded", inbox.Filter{Contains: "needle", ScanLimit: 2}, 1},
			{"what a search scans", inbox.Filter{Contains: "needle", ScanLimit: 2}.Scan(), 5},
			{"job status", inbox.Filter{JobStatus: "COMPLETED"}, 2},
		} {
			if got, err := e.s.Count(ctx, tt.f); err != nil || got != tt.want {
				t.Errorf("count %s: got %d, %v; want %d", tt.name, got, err, tt.want)
			}
		}
		groups, err := e.s.ParkedByReason(ctx, inbox.Filter{Contains: "needle"})
		if err != nil || len(groups) != 1 || groups[0].Reason != inbox.ReasonUnparseable || groups[0].Count != 1 {
			t.Errorf("parked by reason containing needle: %+v, %v", groups, err)
		}
	})

	// A job's rows: its own row and the deliveries kept beside it (a
	// conflict, a poison repeat), whichever the job is seen from; another
	// source's job is named by its row id.
	t.Run("a job's rows", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		conflict := `{"event":"job.failed","job_id":"job_1","status":"ERROR"}`
		poison := `{"event":"job.exploded","job_id":"job_1"}`
		e.put(job("job_1"))
		e.clock.Add(time.Minute)
		e.put(job("job_2"))
		e.clock.Add(time.Minute)
		e.put(classify(conflict))
		e.clock.Add(time.Minute)
		e.put(classify(`{"event":"job.failed","job_id":"job_2","status":"ERROR"}`))
		e.clock.Add(time.Minute)
		e.put(classify(poison))
		e.clock.Add(time.Minute)
		e.put(keyed("vibe", "run_1", "scheduled_job.run", []byte(`{"attempt":1}`), 1, inbox.Rules{}))
		e.clock.Add(time.Minute)
		vibeConflict := []byte(`{"event":"job.completed","job_id":"vibe/run_1"}`)
		e.put(inbox.Classify("", inbox.Named{}, vibeConflict, 1, inbox.Rules{Events: []string{"job.completed"}}))
		for _, tt := range []struct {
			name string
			f    inbox.Filter
			want []string
		}{
			{"a job row and those beside it, newest first", inbox.Filter{Job: "job_1"},
				[]string{inbox.BodyKey(sha(poison)), inbox.BodyKey(sha(conflict)), "job_1"}},
			{"with other filters", inbox.Filter{Job: "job_1", Status: inbox.StatusParked, Reason: inbox.ReasonConflict},
				[]string{inbox.BodyKey(sha(conflict))}},
			{"limit", inbox.Filter{Job: "job_1", Limit: 1}, []string{inbox.BodyKey(sha(poison))}},
			{"another source's job", inbox.Filter{Job: "vibe/run_1"}, []string{inbox.BodyKey(sha(string(vibeConflict))), "vibe/run_1"}},
			{"a job with no row", inbox.Filter{Job: "job_404"}, nil},
			{"a beside row's id is no job", inbox.Filter{Job: inbox.BodyKey(sha(conflict))}, []string{inbox.BodyKey(sha(conflict))}},
		} {
			if got := list(t, e, tt.f); !slices.Equal(got, tt.want) {
				t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
			}
		}
		if n, err := e.s.Count(ctx, inbox.Filter{Job: "job_1"}); err != nil || n != 3 {
			t.Errorf("count the rows of job_1: %d, %v; want 3", n, err)
		}
	})

	t.Run("counts", func(t *testing.T) {
		t.Parallel()
		e := filled(t)
		got, err := e.s.CountByStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := map[inbox.Status]int64{inbox.StatusNew: 3, inbox.StatusDone: 0, inbox.StatusParked: 2, inbox.StatusIgnored: 1, inbox.StatusDismissed: 0}
		if len(got) != len(want) {
			t.Fatalf("got %v, want %v", got, want)
		}
		for st, n := range want {
			if got[st] != n {
				t.Errorf("%s: got %d, want %d", st, got[st], n)
			}
		}
		st := e.stats()
		if st.ByStatus[inbox.StatusNew] != 3 || st.ByStatus[inbox.StatusParked] != 2 || st.ByStatus[inbox.StatusIgnored] != 1 {
			t.Errorf("stats by status %v", st.ByStatus)
		}
		if st.ByReason[inbox.ReasonUnparseable] != 1 || st.ByReason[inbox.ReasonUnknownEvent] != 1 || len(st.ByReason) != 2 {
			t.Errorf("stats by reason %v", st.ByReason)
		}
		if st.BySource["gh"][inbox.StatusNew] != 1 || st.BySource["sume"][inbox.StatusNew] != 2 {
			t.Errorf("stats by source %v", st.BySource)
		}
		if st.Queue.Depth != 3 || !st.Queue.Oldest.Equal(t0) {
			t.Errorf("stats queue %+v", st.Queue)
		}
	})

	t.Run("parked by reason", func(t *testing.T) {
		t.Parallel()
		e := filled(t)
		e.put(classify(`[1]`))
		got, err := e.s.ParkedByReason(ctx, inbox.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		end := t0.Add(6 * time.Minute)
		want := []inbox.ReasonCount{
			{Reason: inbox.ReasonUnparseable, Count: 2, Oldest: t0.Add(time.Minute), Newest: end},
			{Reason: inbox.ReasonUnknownEvent, Count: 1, Oldest: t0.Add(3 * time.Minute), Newest: t0.Add(3 * time.Minute)},
		}
		if !slices.Equal(got, want) {
			t.Errorf("got %+v, want %+v", got, want)
		}
		got, err = e.s.ParkedByReason(ctx, inbox.Filter{Since: t0.Add(2 * time.Minute), Status: inbox.StatusNew, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].Count != 1 || got[1].Count != 1 {
			t.Errorf("since t0+2m: %+v, want one of each", got)
		}
	})

	t.Run("secret uses", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		if got, err := e.s.SecretUses(ctx); err != nil || len(got) != 0 {
			t.Errorf("none recorded: %v %v", got, err)
		}
		at := func(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
		use := func(source, fp string, t time.Time) inbox.SecretUse {
			return inbox.SecretUse{Source: source, Fingerprint: fp, LastVerified: t}
		}
		if err := e.s.RecordSecretUses(ctx, []inbox.SecretUse{use("vibe", "aa", at(2000)), use("vibe", "bb", at(1000)), use("gh", "cc", at(5))}); err != nil {
			t.Fatal(err)
		}
		// An older time never replaces a newer one.
		if err := e.s.RecordSecretUses(ctx, []inbox.SecretUse{use("vibe", "aa", at(1500)), use("vibe", "bb", at(3000))}); err != nil {
			t.Fatal(err)
		}
		if err := e.s.RecordSecretUses(ctx, nil); err != nil {
			t.Fatal(err)
		}
		got, err := e.s.SecretUses(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := []inbox.SecretUse{use("gh", "cc", at(5)), use("vibe", "aa", at(2000)), use("vibe", "bb", at(3000))}
		if !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})

	t.Run("failed verifications", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		if got, err := e.s.Unverified(ctx); err != nil || len(got) != 0 {
			t.Errorf("none recorded: %v %v", got, err)
		}
		at := func(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
		run := func(source string, n, first, last int64) inbox.Unverified {
			return inbox.Unverified{Source: source, Count: n, First: at(first), Last: at(last)}
		}
		record := func(runs ...inbox.Unverified) {
			t.Helper()
			if err := e.s.RecordUnverified(ctx, runs); err != nil {
				t.Fatal(err)
			}
		}
		check := func(step string, want ...inbox.Unverified) {
			t.Helper()
			got, err := e.s.Unverified(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s: got %v, want %v", step, got, want)
			}
		}
		// Two runs of one source in one call are one.
		record(run("vibe", 3, 100, 200), run("gh", 1, 50, 50), run("vibe", 2, 150, 300))
		check("first", run("gh", 1, 50, 50), run("vibe", 5, 100, 300))
		record(run("vibe", 1, 400, 400))
		record()
		check("added", run("gh", 1, 50, 50), run("vibe", 6, 100, 400))
		// A delivery of vibe verified after its run began: the run is
		// over, and the next failures start another. One of gh verified
		// before its run began: gh's run goes on.
		if err := e.s.RecordSecretUses(ctx, []inbox.SecretUse{{Source: "vibe", Fingerprint: "aa", LastVerified: at(350)}, {Source: "gh", Fingerprint: "cc", LastVerified: at(10)}}); err != nil {
			t.Fatal(err)
		}
		record(run("vibe", 2, 500, 600), run("gh", 4, 60, 70))
		check("after a verified delivery", run("gh", 5, 50, 70), run("vibe", 2, 500, 600))
		// The run that began at 500 holds, its first failure after the
		// last verified delivery: what a broken rotation looks like.
		record(run("vibe", 1, 700, 700))
		check("broken", run("gh", 5, 50, 70), run("vibe", 3, 500, 700))
	})
}

func runCount(t *testing.T, o opener) {
	ctx := context.Background()

	t.Run("count", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		for _, d := range []inbox.Delivery{
			job("job_1"), classify(`not json`), classify(`{"event":"webhook.test"}`),
			classify(exploded("job_x")), keyed("gh", "d1", "push", []byte(`{}`), 1, inbox.Rules{}), job("job_2"),
		} {
			e.put(d)
			e.clock.Add(time.Minute)
		}
		e.put(job("job_1")) // a repeat is no row
		for _, f := range []inbox.Filter{
			{}, {Limit: 2}, {Status: inbox.StatusNew}, {Status: inbox.StatusNew, Limit: 1}, {Status: inbox.StatusDone},
			{Status: inbox.StatusParked}, {Reason: inbox.ReasonUnparseable}, {Source: "gh"}, {Source: "gh", Status: inbox.StatusParked},
			{Since: t0.Add(time.Minute), Before: t0.Add(3 * time.Minute)}, {Since: t0.Add(time.Hour)},
		} {
			got, err := e.s.Count(ctx, f)
			if err != nil {
				t.Fatalf("count %+v: %v", f, err)
			}
			unlimited := f
			unlimited.Limit = 0
			rows, err := e.s.List(ctx, unlimited)
			if err != nil {
				t.Fatal(err)
			}
			if got != int64(len(rows)) {
				t.Errorf("count %+v = %d, want %d, the rows list returns without a limit", f, got, len(rows))
			}
		}
		if n, err := e.s.Count(ctx, inbox.Filter{}); err != nil || n != 6 {
			t.Errorf("count everything = %d, %v; want 6", n, err)
		}
	})

	t.Run("parked per hour", func(t *testing.T) {
		t.Parallel()
		// Rows count in the hour they were parked, on receipt or by the
		// dispatcher, not when they were received; end is exclusive.
		e := o.fresh(t)
		end := t0.Add(3 * time.Hour)
		e.fill(t0.Add(-48*time.Hour), completed("job_failed"))
		e.fill(t0.Add(-48*time.Hour+time.Millisecond), completed("job_new"))
		jobs := e.claim("d1", t0.Add(-47*time.Hour), time.Hour, 1)
		if len(jobs) != 1 || jobs[0].ID != "job_failed" {
			t.Fatalf("claimed %v, want job_failed", ids(jobs))
		}
		parkedAt := t0.Add(90 * time.Minute)
		if stale := e.settle("d1", parkedAt, inbox.Settlement{Job: jobs[0], Fate: inbox.FatePark, At: parkedAt,
			Reason: inbox.ReasonHandlerFailed, Error: "500"}); stale != 0 {
			t.Fatal("the park was stale")
		}
		for at, body := range map[time.Duration]string{
			-time.Millisecond:               exploded("job_before"), // before the first hour
			0:                               exploded("job_h0"),
			59*time.Minute + 59*time.Second: exploded("job_h0b"),
			time.Hour:                       exploded("job_h1"),
			2*time.Hour + 30*time.Minute:    exploded("job_h2"),
			3*time.Hour - time.Millisecond:  exploded("job_h2b"),
			3 * time.Hour:                   exploded("job_end"), // at end: not counted
			2*time.Hour + 31*time.Minute + 10*time.Second: `not json`,
		} {
			e.fill(t0.Add(at), body)
		}
		e.clock.Set(t0.Add(10 * time.Hour))
		e.put(classify(exploded("job_h1"))) // a repeat moves no row to another hour
		e.put(classify(completed("job_h0b")))

		perHour := func(f inbox.Filter, hours int) []int64 {
			t.Helper()
			got, err := e.s.ParkedPerHour(ctx, f, end, hours)
			if err != nil {
				t.Fatalf("parked per hour %+v: %v", f, err)
			}
			if len(got) != hours {
				t.Fatalf("parked per hour %+v: %d hours, want %d", f, len(got), hours)
			}
			counts := make([]int64, hours)
			for i, h := range got {
				if start := end.Add(time.Duration(i-hours) * time.Hour); !h.Start.Equal(start) {
					t.Errorf("hour %d starts %s, want %s", i, h.Start, start)
				}
				counts[i] = h.Count
			}
			return counts
		}
		// job_h0b was revived by its storable delivery: no longer parked.
		for _, tt := range []struct {
			name  string
			f     inbox.Filter
			hours int
			want  []int64
		}{
			{"every reason", inbox.Filter{}, 3, []int64{1, 2, 3}},
			{"status, times and limit ignored", inbox.Filter{Status: inbox.StatusNew, Since: end, Before: t0, Limit: 1}, 3, []int64{1, 2, 3}},
			{"one hour", inbox.Filter{}, 1, []int64{3}},
			{"a day", inbox.Filter{}, 24, append(make([]int64, 20), 1, 1, 2, 3)},
			{"the dispatcher's", inbox.Filter{Reason: inbox.ReasonHandlerFailed}, 3, []int64{0, 1, 0}},
			{"unparseable", inbox.Filter{Reason: inbox.ReasonUnparseable}, 3, []int64{0, 0, 1}},
			{"another source", inbox.Filter{Source: "gh"}, 3, []int64{0, 0, 0}},
		} {
			if got := perHour(tt.f, tt.hours); !slices.Equal(got, tt.want) {
				t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
			}
		}
		if got, err := e.s.ParkedPerHour(ctx, inbox.Filter{}, end, 0); err != nil || len(got) != 0 {
			t.Errorf("no hours: %v, %v", got, err)
		}
	})
}
