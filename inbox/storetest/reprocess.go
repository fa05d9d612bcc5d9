package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"inbox/inbox"
)

// small classifies as serve does by default, with a small body limit so
// too_large rows are cheap to make.
var small = inbox.Rules{Events: rules.Events, MaxBody: 1 << 10}

func completed(jobID string) string {
	return fmt.Sprintf(`{"event":"job.completed","job_id":%q,"status":"COMPLETED","payload":{"artifacts":[]}}`, jobID)
}

func exploded(jobID string) string { return fmt.Sprintf(`{"event":"job.exploded","job_id":%q}`, jobID) }

func bigCompleted(jobID string, size int) string {
	return fmt.Sprintf(`{"event":"job.completed","job_id":%q,"status":"COMPLETED","payload":{"pad":%q}}`, jobID, strings.Repeat("x", size))
}

func payloadTooLarge(jobID string) string {
	return fmt.Sprintf(`{"event":"job.completed","job_id":%q,"status":"COMPLETED","payload":null,"error":{"code":"payload_too_large","result_url":"https://api.example/r"}}`, jobID)
}

// fill puts the bodies one after another, classified under small, with
// the store's clock at receivedAt.
func (e *env) fill(receivedAt time.Time, bodies ...string) {
	e.t.Helper()
	e.clock.Set(receivedAt)
	for _, b := range bodies {
		e.put(inbox.Classify("", inbox.Named{}, []byte(b), deliveryTS, small))
	}
}

// sume is the rules reprocess classifies Sume rows again by: the events
// given, and serve's default body limit.
func sume(events ...string) inbox.SourceRules {
	return inbox.SourceRules{inbox.DefaultSource: {Events: events, MaxBody: 1 << 20}}
}

// reprocess runs Reprocess, skipping the test when the store does not
// support it.
func (e *env) reprocess(sel inbox.Selection, sr inbox.SourceRules, dryRun bool) inbox.ReprocessReport {
	e.t.Helper()
	rep, err := e.s.Reprocess(context.Background(), sel, sr, dryRun)
	if errors.Is(err, errors.ErrUnsupported) {
		e.t.Skipf("reprocess: %v", err)
	}
	if err != nil {
		e.t.Fatalf("reprocess: %v", err)
	}
	return rep
}

// snapshot is every row, every column, body included.
func (e *env) snapshot() string {
	e.t.Helper()
	rows, err := e.s.List(context.Background(), inbox.Filter{})
	if err != nil {
		e.t.Fatal(err)
	}
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%+v\n", e.get(r.ID))
	}
	return b.String()
}

func sameJSON(t *testing.T, what string, got, want any) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Errorf("%s = %s, want %s", what, g, w)
	}
}

func runReprocess(t *testing.T, o opener) {
	ctx := context.Background()

	t.Run("after the event set changes", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		e.fill(t0, exploded("job_x"), exploded("job_x"))
		before := e.get("job_x")
		e.clock.Add(time.Hour)
		rep := e.reprocess(inbox.Selection{Reason: inbox.ReasonUnknownEvent}, sume(rules.Events...), false)
		if rep.Moved != 0 || rep.Parked[inbox.ReasonUnknownEvent] != 1 {
			t.Errorf("the same events: report %+v, want 0 moved, 1 unknown_event", rep)
		}
		if got := e.get("job_x"); got.Status != inbox.StatusParked || !got.UpdatedAt.Equal(before.UpdatedAt) {
			t.Errorf("row changed although its reason did not: %+v", got)
		}
		rep = e.reprocess(inbox.Selection{Reason: inbox.ReasonUnknownEvent}, sume("job.completed", "job.exploded"), false)
		if rep.Moved != 1 {
			t.Errorf("report %+v, want 1 moved", rep)
		}
		got := e.get("job_x")
		if got.Status != inbox.StatusNew || got.Reason != "" || got.Event != "job.exploded" || !got.UpdatedAt.Equal(t0.Add(time.Hour)) {
			t.Errorf("row = %+v, want new job.exploded", got)
		}
		// The verification on record stays.
		if got.DeliveryTS != deliveryTS || !got.ReceivedAt.Equal(t0) || got.Deliveries != 2 || got.SHA256 != before.SHA256 {
			t.Errorf("row = %+v, want delivery_ts %d, received %s, 2 deliveries, the same body", got, deliveryTS, t0)
		}
	})

	t.Run("in batches", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		const n = 250
		bodies := make([]string, n)
		for i := range bodies {
			bodies[i] = exploded(fmt.Sprintf("job_%d", i))
		}
		e.putAll(bodies...)
		rep := e.reprocess(inbox.Selection{Reason: inbox.ReasonUnknownEvent}, sume(append([]string{"job.exploded"}, rules.Events...)...), false)
		if rep.Moved != n || len(rep.Parked) != 0 {
			t.Errorf("report %+v, want %d moved", rep, n)
		}
		st := e.stats()
		if st.ByStatus[inbox.StatusNew] != n || st.ByStatus[inbox.StatusParked] != 0 {
			t.Errorf("rows %v, want %d new", st.ByStatus, n)
		}
	})

	// merged holds, for job_fold, a new row and a parked too_large delivery
	// of the same event and status beside it (delivered twice); for
	// job_conflict, a new row and a job.exploded delivery beside it; for
	// job_revive, a parked payload_too_large row and a job.exploded
	// delivery beside it.
	bigFold := `{"event":"job.completed","job_id":"job_fold","status":"COMPLETED","payload":{"pad":"` + strings.Repeat("x", 2<<10) + `"}}`
	merged := func(t *testing.T) *env {
		e := o.fresh(t)
		e.fill(t0, completed("job_fold"), completed("job_conflict"), payloadTooLarge("job_revive"))
		e.fill(t0.Add(time.Minute), bigFold, bigFold, exploded("job_conflict"), exploded("job_revive"))
		return e
	}
	events := sume("job.completed", "job.exploded")

	t.Run("merges", func(t *testing.T) {
		t.Parallel()
		e := merged(t)
		foldKey := inbox.BodyKey(sha(bigFold))
		if r := e.get(foldKey); r.Reason != inbox.ReasonTooLarge || r.Deliveries != 2 {
			t.Fatalf("fold row = %+v, want too_large with 2 deliveries", r)
		}
		rep := e.reprocess(inbox.Selection{All: true}, events, false)
		sameJSON(t, "report", rep, inbox.ReprocessReport{Moved: 1, Folded: 1, Parked: map[inbox.Reason]int{
			inbox.ReasonConflict: 1, inbox.ReasonPayloadTooLarge: 1}})
		// Same event and status: folded into the job's row.
		if r := e.get("job_fold"); r.Status != inbox.StatusNew || r.Deliveries != 3 || string(r.Body) != completed("job_fold") {
			t.Errorf("job row = %+v, want new, 1+2 deliveries, its own body", r)
		}
		if !e.gone(foldKey) {
			t.Error("the folded row is still there")
		}
		// A different event stays parked conflict.
		if r := e.get(inbox.BodyKey(sha(exploded("job_conflict")))); r.Status != inbox.StatusParked || r.Reason != inbox.ReasonConflict {
			t.Errorf("row = %+v, want parked conflict", r)
		}
		if r := e.get("job_conflict"); r.Event != "job.completed" || r.Deliveries != 1 {
			t.Errorf("job row changed: %+v", r)
		}
		// A parked job row is taken over, its body kept beside.
		if r := e.get("job_revive"); r.Status != inbox.StatusNew || r.Event != "job.exploded" ||
			string(r.Body) != exploded("job_revive") || r.Deliveries != 1 || r.ResultURL != "" {
			t.Errorf("job row = %+v, want new with the job.exploded body and its 1 delivery", r)
		}
		if !e.gone(inbox.BodyKey(sha(exploded("job_revive")))) {
			t.Error("the storable row is still there under its own key")
		}
		aside := e.get(inbox.BodyKey(sha(payloadTooLarge("job_revive"))))
		if aside.Status != inbox.StatusParked || aside.Reason != inbox.ReasonPayloadTooLarge ||
			string(aside.Body) != payloadTooLarge("job_revive") || aside.ResultURL == "" || aside.JobID != "job_revive" {
			t.Errorf("the job row's own body = %+v, want it parked payload_too_large under its sha256", aside)
		}
	})

	t.Run("dry run changes nothing and counts what a run does", func(t *testing.T) {
		t.Parallel()
		e := merged(t)
		e.fill(t0.Add(2*time.Minute), "not json", exploded("job_new"))
		before := e.snapshot()
		dry := e.reprocess(inbox.Selection{All: true}, events, true)
		if after := e.snapshot(); after != before {
			t.Fatalf("dry run changed the table:\n%s\nwant\n%s", after, before)
		}
		if !dry.DryRun || dry.Moved != 2 || dry.Folded != 1 {
			t.Errorf("dry run report = %+v, want 2 moved, 1 folded", dry)
		}
		real := e.reprocess(inbox.Selection{All: true}, events, false)
		dry.DryRun = false
		sameJSON(t, "dry run report", dry, real)
		if e.snapshot() == before {
			t.Error("the real run changed nothing")
		}
	})

	t.Run("refuses", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		e.fill(t0, completed("job_new"), exploded("job_parked"))
		e.put(keyed("gh", "d1", "ping", []byte(`{}`), 1, inbox.Rules{Events: []string{"push"}}))
		before := e.snapshot()
		for _, tt := range []struct {
			name string
			sel  inbox.Selection
			want string
		}{
			{"nothing selected", inbox.Selection{}, "no rows selected"},
			{"not parked", inbox.Selection{IDs: []string{"job_new"}}, "not parked"},
			{"not found", inbox.Selection{IDs: []string{"job_parked", "job_404"}}, "not found"},
			{"unconfigured source", inbox.Selection{IDs: []string{"gh/d1"}}, "not configured"},
		} {
			_, err := e.s.Reprocess(ctx, tt.sel, sume("job.exploded"), false)
			if errors.Is(err, errors.ErrUnsupported) {
				t.Skipf("reprocess: %v", err)
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s: err = %v, want %q", tt.name, err, tt.want)
			}
		}
		if _, err := e.s.Reprocess(ctx, inbox.Selection{IDs: []string{"job_404"}}, sume(), false); !errors.Is(err, inbox.ErrNotFound) {
			t.Errorf("a missing id: %v, want ErrNotFound", err)
		}
		// Selections pass over rows of sources the rules do not name.
		if rep := e.reprocess(inbox.Selection{All: true}, inbox.SourceRules{"other": {Kind: inbox.KindKeyed}}, false); rep.Moved != 0 || len(rep.Parked) != 0 {
			t.Errorf("all of another source: %+v, want nothing", rep)
		}
		if after := e.snapshot(); after != before {
			t.Errorf("a refused run changed the table:\n%s\nwant\n%s", after, before)
		}
	})

	t.Run("keeps the job row's body", func(t *testing.T) {
		t.Parallel()
		// A storable row beside a parked job row never overwrites the job
		// row's body: either way both bodies are kept, one in job_1, new,
		// the other parked under its sha256 key.
		for _, tt := range []struct {
			name           string
			maxBody        int64
			jobKeepsItsOwn bool
			parked         inbox.Reason
		}{
			{"the job row is storable now: it comes first", 4 << 20, true, inbox.ReasonConflict},
			{"the job row is still not storable: its body is kept aside", 1 << 10, false, inbox.ReasonTooLarge},
		} {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				e := o.fresh(t)
				big, boom := bigCompleted("job_1", 2<<10), exploded("job_1")
				e.fill(t0, big)
				e.fill(t0.Add(time.Minute), boom)
				if r := e.get(inbox.BodyKey(sha(boom))); r.Reason != inbox.ReasonUnknownEvent {
					t.Fatalf("beside row = %+v, want parked unknown_event", r)
				}
				rep := e.reprocess(inbox.Selection{Reason: inbox.ReasonUnknownEvent},
					inbox.SourceRules{inbox.DefaultSource: {Events: []string{"job.completed", "job.exploded"}, MaxBody: tt.maxBody}}, false)
				sameJSON(t, "report", rep, inbox.ReprocessReport{Moved: 1, JobRows: 1, Parked: map[inbox.Reason]int{tt.parked: 1}})
				inJob, aside := boom, big
				if tt.jobKeepsItsOwn {
					inJob, aside = big, boom
				}
				if r := e.get("job_1"); r.Status != inbox.StatusNew || string(r.Body) != inJob {
					t.Errorf("job_1 = %+v %.40q, want new with %.40q", r, r.Body, inJob)
				}
				if r := e.get(inbox.BodyKey(sha(aside))); r.Status != inbox.StatusParked || r.Reason != tt.parked || string(r.Body) != aside {
					t.Errorf("%s = %+v, want parked %s", r.ID, r, tt.parked)
				}
			})
		}
	})

	t.Run("every source", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		push := inbox.Rules{Events: []string{"push"}}
		vibe := keyed("vibe", "run_1", "scheduled_job.run", []byte(`{"runId":"run_1"}`), deliveryTS, inbox.Rules{})
		vibe.Response = []byte(`{"accepted":true}`)
		for _, d := range []inbox.Delivery{
			keyed("gh", "d1", "ping", []byte(`{"zen":"x"}`), deliveryTS, push),                                                        // parked unknown_event
			keyed("gh", "", "push", []byte(`{"ref":"main"}`), deliveryTS, push),                                                       // parked missing_key
			keyed("gh", "d2", "push", []byte(`{"ref":"dev","pad":1}`), deliveryTS, inbox.Rules{Events: []string{"push"}, MaxBody: 4}), // too_large
			vibe,
		} {
			e.put(d)
		}
		j := e.claim("test", t0, time.Hour, 10)
		if len(j) != 1 || j[0].ID != "vibe/run_1" {
			t.Fatalf("claimed %v, want vibe/run_1", ids(j))
		}
		e.settle("test", t0, inbox.Settlement{Job: j[0], Fate: inbox.FatePark, At: t0, Reason: inbox.ReasonHandlerFailed, Error: "HTTP 500"})
		all := inbox.SourceRules{"gh": {Kind: inbox.KindKeyed, Events: []string{"push", "ping"}, MaxBody: 1 << 10}, "vibe": {Kind: inbox.KindKeyed}}

		if rep := e.reprocess(inbox.Selection{All: true}, sume(), false); rep.Moved != 0 || len(rep.Parked) != 0 {
			t.Errorf("all of sume: %+v, want nothing", rep)
		}
		if rep := e.reprocess(inbox.Selection{Reason: inbox.ReasonUnknownEvent}, all, false); rep.Moved != 1 {
			t.Errorf("unknown_event: %+v, want 1 moved", rep)
		}
		if r := e.get("gh/d1"); r.Status != inbox.StatusNew || r.Event != "ping" || r.JobID != "gh/d1" {
			t.Errorf("gh/d1 = %+v, want new ping", r)
		}
		if rep := e.reprocess(inbox.Selection{IDs: []string{"vibe/run_1"}}, all, false); rep.Moved != 1 {
			t.Errorf("vibe/run_1: %+v, want 1 moved", rep)
		}
		if r := e.get("vibe/run_1"); r.Status != inbox.StatusNew || r.Attempts != 0 || r.LastError != "" || string(r.Response) != `{"accepted":true}` {
			t.Errorf("vibe/run_1 = %+v, want new, no attempts, the saved answer kept", r)
		}
		if rep := e.reprocess(inbox.Selection{All: true}, all, false); rep.Moved != 1 || rep.Parked[inbox.ReasonMissingKey] != 1 {
			t.Errorf("all: %+v, want the too_large row moved and missing_key kept", rep)
		}
		if r := e.get("gh/d2"); r.Status != inbox.StatusNew {
			t.Errorf("gh/d2 = %+v, want new under max_body 1KiB", r)
		}
	})

	t.Run("moving aside keeps the source", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		recv := inbox.Rules{Events: []string{"push"}, MaxBody: 10}
		big := `{"a":"` + strings.Repeat("x", 40) + `"}`
		e.put(keyed("gh", "d1", "push", []byte(big), 1, recv))
		e.put(keyed("gh", "d1", "ping", []byte(`{}`), 1, recv))
		e.reprocess(inbox.Selection{Reason: inbox.ReasonUnknownEvent}, inbox.SourceRules{"gh": {Kind: inbox.KindKeyed, Events: []string{"push", "ping"}, MaxBody: 10}}, false)
		want := inbox.RowID("gh", inbox.BodyKey(sha(big)))
		if e.gone(want) {
			t.Fatalf("the job row's body is not at %s", want)
		}
		if r := e.get("gh/d1"); r.Status != inbox.StatusNew || r.Event != "ping" {
			t.Errorf("gh/d1 = %+v, want the ping, new", r)
		}
	})

	// A source that keys every delivery by its body's sha256: its rows
	// parked missing_key (as a build that did not key them so parked
	// them) are stored where they are. (Their job_id stays empty: no row
	// can land beside a row keyed by its own bytes.)
	t.Run("rows keyed by their body", func(t *testing.T) {
		t.Parallel()
		e := o.fresh(t)
		body := []byte(`{"order":1}`)
		parked := e.put(keyed("hm", "", "order.paid", body, deliveryTS, inbox.Rules{}))
		if parked.Reason != inbox.ReasonMissingKey {
			t.Fatalf("setup: %+v", parked)
		}
		rep := e.reprocess(inbox.Selection{Reason: inbox.ReasonMissingKey}, inbox.SourceRules{"hm": {Kind: inbox.KindKeyed, ByBody: true}}, false)
		if rep.Moved != 1 {
			t.Errorf("report %+v, want the row moved to new", rep)
		}
		if r := e.get(parked.ID); r.Status != inbox.StatusNew || r.Event != "order.paid" {
			t.Errorf("%s = %s %s event %q, want new where it is", parked.ID, r.Status, r.Reason, r.Event)
		}
		// A repeat of the bytes is counted on it.
		if res := e.put(inbox.Classify("hm", inbox.Named{Event: "order.paid"}, body, deliveryTS, inbox.Rules{Kind: inbox.KindKeyed, ByBody: true})); res.Outcome != inbox.OutcomeDuplicate || res.ID != parked.ID {
			t.Errorf("repeat: %+v, want a duplicate on %s", res, parked.ID)
		}
	})

	// Once one parked row of a job has become the job's new row (where it
	// was, or taking over the job's parked row), a later parked row of the
	// job with the same event and status folds into it, as a repeat would:
	// never parked conflict beside its own copy. For every kind of source.
	t.Run("folds later rows into the row it made", func(t *testing.T) {
		t.Parallel()
		odd := func(id string, n int) string {
			return fmt.Sprintf(`{"event":"job.odd","job_id":%q,"status":"COMPLETED","n":%d}`, id, n)
		}
		exploded := func(id string, n int) string {
			return fmt.Sprintf(`{"event":"job.exploded","job_id":%q,"status":"COMPLETED","n":%d}`, id, n)
		}
		for _, tt := range []struct {
			name, source string
			kind         inbox.Kind
			// first is the body the job's own row is parked with.
			first func(string, int) string
			// want is the report; deliveries the job row's count after.
			want       inbox.ReprocessReport
			deliveries int64
		}{
			{"own row made new, sume", inbox.DefaultSource, inbox.KindBody, exploded,
				inbox.ReprocessReport{Moved: 1, Folded: 2, Parked: map[inbox.Reason]int{}}, 3},
			{"own row made new, a sume-scheme source", "acme", inbox.KindBody, exploded,
				inbox.ReprocessReport{Moved: 1, Folded: 2, Parked: map[inbox.Reason]int{}}, 3},
			{"job row taken over, sume", inbox.DefaultSource, inbox.KindBody, odd,
				inbox.ReprocessReport{Moved: 1, Folded: 1, Parked: map[inbox.Reason]int{inbox.ReasonUnknownEvent: 1}}, 2},
			{"job row taken over, a sume-scheme source", "acme", inbox.KindBody, odd,
				inbox.ReprocessReport{Moved: 1, Folded: 1, Parked: map[inbox.Reason]int{inbox.ReasonUnknownEvent: 1}}, 2},
		} {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				e := o.fresh(t)
				recv := inbox.Rules{Kind: tt.kind, Events: []string{"job.completed"}, MaxBody: 1 << 20}
				put := func(body string) inbox.Result {
					return e.put(inbox.Classify(tt.source, inbox.Named{}, []byte(body), deliveryTS, recv))
				}
				put(tt.first("j1", 1))
				e.clock.Add(time.Millisecond)
				beside2, beside3 := put(exploded("j1", 2)), put(exploded("j1", 3))
				if beside2.Reason != inbox.ReasonUnknownEvent || beside3.Reason != inbox.ReasonUnknownEvent || beside2.ID == beside3.ID {
					t.Fatalf("setup: %+v %+v, want two rows parked unknown_event beside the job", beside2, beside3)
				}
				now := recv
				now.Events = []string{"job.completed", "job.exploded"}
				rep := e.reprocess(inbox.Selection{Reason: inbox.ReasonUnknownEvent}, inbox.SourceRules{tt.source: now}, false)
				key := inbox.RowID(tt.source, "j1")
				job := e.get(key)
				if job.Status != inbox.StatusNew || job.Event != "job.exploded" {
					t.Fatalf("%s = %+v, want the job's new job.exploded row", key, job)
				}
				sameJSON(t, "report", rep, tt.want)
				if job.Deliveries != tt.deliveries {
					t.Errorf("%s has %d deliveries, want %d: the later rows' counted on it", key, job.Deliveries, tt.deliveries)
				}
				if !e.gone(beside3.ID) {
					r := e.get(beside3.ID)
					t.Errorf("the later row %s is still there, %s %s: want it folded into %s", r.ID, r.Status, r.Reason, key)
				}
			})
		}
	})
}
