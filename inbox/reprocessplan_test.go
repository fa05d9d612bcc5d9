package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"inbox/inbox"
)

// TestSelectionCheck runs the selections Reprocess refuses and takes.
func TestSelectionCheck(t *testing.T) {
	rules := inbox.SourceRules{"sume": {}}
	tests := []struct {
		sel   inbox.Selection
		rules inbox.SourceRules
		want  string // "" for none
	}{
		{inbox.Selection{}, rules, "no rows selected"},
		{inbox.Selection{IDs: []string{"j1"}}, nil, ""},
		{inbox.Selection{Reason: inbox.ReasonConflict}, rules, ""},
		{inbox.Selection{All: true}, rules, ""},
		{inbox.Selection{All: true}, inbox.SourceRules{}, "no source to classify rows of"},
		{inbox.Selection{Reason: inbox.ReasonConflict}, nil, "no source to classify rows of"},
	}
	for _, tt := range tests {
		err := tt.sel.Check(tt.rules)
		if (tt.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v with %d sources: got %v, want %q", tt.sel, len(tt.rules), err, tt.want)
		}
	}
	if got := (inbox.Selection{IDs: []string{"b", "a", "b", "c", "a"}}).UniqueIDs(); !reflect.DeepEqual(got, []string{"b", "a", "c"}) {
		t.Errorf("UniqueIDs: got %v", got)
	}
}

// TestCheckSelected refuses a named row that is not parked or is of a
// source not configured, and takes a parked row of a configured one.
func TestCheckSelected(t *testing.T) {
	rules := inbox.SourceRules{"sume": {}}
	tests := []struct {
		status inbox.Status
		source string
		want   string
	}{
		{inbox.StatusParked, "sume", ""},
		{inbox.StatusNew, "sume", "j1 is new, not parked"},
		{inbox.StatusDone, "sume", "j1 is done, not parked"},
		{inbox.StatusParked, "vibe", "j1 is a row of source vibe, which is not configured"},
	}
	for _, tt := range tests {
		err := rules.CheckSelected("j1", tt.status, tt.source)
		if (tt.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s row of %s: got %v, want %q", tt.status, tt.source, err, tt.want)
		}
	}
}

// TestBatches gathers rows by job in the order of each job's oldest row
// and never splits a job, whichever bound a batch reaches first.
func TestBatches(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_000)
	rows := []inbox.Selected{
		{ID: "c", Job: "jc", Size: 10, ReceivedAt: at},
		{ID: "a", Job: "ja", Size: 10, ReceivedAt: at},
	}
	inbox.SortSelected(rows)
	if rows[0].ID != "a" {
		t.Errorf("SortSelected: same time, got %s first, want a", rows[0].ID)
	}
	rows = []inbox.Selected{
		{ID: "j1", Job: "j1", Size: 10, ReceivedAt: at.Add(-time.Second)},
		{ID: "c", Job: "jc", Size: 10, ReceivedAt: at},
		{ID: "a", Job: "ja", Size: 10, ReceivedAt: at},
		{ID: "sha256:x", Job: "j1", Size: 10, ReceivedAt: at.Add(time.Second)},
	}
	inbox.SortSelected(rows)
	var got []string
	for _, r := range rows {
		got = append(got, r.ID)
	}
	if want := []string{"j1", "a", "c", "sha256:x"}; !reflect.DeepEqual(got, want) {
		t.Errorf("SortSelected: got %v, want %v", got, want)
	}
	show := func(batches [][]inbox.JobRows) string {
		var b strings.Builder
		for _, batch := range batches {
			b.WriteString("[")
			for _, j := range batch {
				fmt.Fprintf(&b, "%s%v%d ", j.Job, j.IDs, j.Size)
			}
			b.WriteString("]")
		}
		return b.String()
	}
	tests := []struct {
		maxRows  int
		maxBytes int64
		want     string
	}{
		{100, 1 << 20, "[j1[j1 sha256:x]20 ja[a]10 jc[c]10 ]"},
		{2, 1 << 20, "[j1[j1 sha256:x]20 ][ja[a]10 jc[c]10 ]"},
		{3, 1 << 20, "[j1[j1 sha256:x]20 ja[a]10 ][jc[c]10 ]"},
		{1, 1 << 20, "[j1[j1 sha256:x]20 ][ja[a]10 ][jc[c]10 ]"},
		{100, 25, "[j1[j1 sha256:x]20 ][ja[a]10 jc[c]10 ]"},
		{100, 5, "[j1[j1 sha256:x]20 ][ja[a]10 ][jc[c]10 ]"},
	}
	for _, tt := range tests {
		if got := show(inbox.Batches(rows, tt.maxRows, tt.maxBytes)); got != tt.want {
			t.Errorf("Batches(%d rows, %d bytes): got %s, want %s", tt.maxRows, tt.maxBytes, got, tt.want)
		}
	}
	if got := inbox.Batches(nil, 100, 1<<20); got != nil {
		t.Errorf("Batches of none: got %v", got)
	}
}

// planStore is the parked rows PlanJob reads, by id.
type planStore map[string]inbox.Event

func (p planStore) read(id string) (inbox.Event, bool, error) {
	if id == "broken" {
		return inbox.Event{}, false, errors.New("disk on fire")
	}
	e, ok := p[id]
	return e, ok, nil
}

// TestPlanJob reads the job's own row first, and reads it along when it
// was not selected only once a selected row is storable; rows gone or of
// a source not configured count as changed, and no body is kept.
func TestPlanJob(t *testing.T) {
	rules := inbox.SourceRules{"sume": {Events: []string{"job.completed"}}}
	storable := `{"event":"job.completed","job_id":"j1","status":"COMPLETED"}`
	unknown := `{"event":"job.odd","job_id":"j1"}`
	row := func(id, body string) inbox.Event {
		return inbox.Event{ID: id, JobID: "j1", Source: "sume", Status: inbox.StatusParked, Body: []byte(body), DeliveryTS: 1}
	}
	parked := planStore{
		"j1":     row("j1", unknown),
		"s1":     row("s1", storable),
		"u1":     row("u1", unknown),
		"vibe/1": {ID: "vibe/1", Source: "vibe", Status: inbox.StatusParked, Body: []byte(storable)},
	}
	ids := func(p inbox.JobPlan) string {
		var out []string
		for _, r := range p.Rows {
			if r.Body != nil || r.Delivery.Body != nil {
				t.Errorf("%s kept its body", r.ID)
			}
			out = append(out, fmt.Sprintf("%s:%v:%v", r.ID, r.Selected, r.Delivery.Status))
		}
		return fmt.Sprintf("%v changed %d", out, p.Changed)
	}
	tests := []struct {
		name string
		ids  []string
		want string
	}{
		{"own row selected goes first", []string{"u1", "j1"}, "[j1:true:parked u1:true:parked] changed 0"},
		{"own row read along for a storable row", []string{"s1"}, "[j1:false:parked s1:true:new] changed 0"},
		{"own row not read along when none is storable", []string{"u1"}, "[u1:true:parked] changed 0"},
		{"a row gone counts changed", []string{"gone", "s1"}, "[j1:false:parked s1:true:new] changed 1"},
		{"a row of a source not configured counts changed", []string{"vibe/1"}, "[] changed 1"},
	}
	for _, tt := range tests {
		p, err := inbox.PlanJob(inbox.JobRows{Job: "j1", IDs: tt.ids}, rules, parked.read)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := ids(p); got != tt.want {
			t.Errorf("%s: got %s, want %s", tt.name, got, tt.want)
		}
	}
	// The own row, not selected, gone meanwhile: nothing read along, and
	// nothing counted changed, as it was not selected.
	delete(parked, "j1")
	if p, err := inbox.PlanJob(inbox.JobRows{Job: "j1", IDs: []string{"s1"}}, rules, parked.read); err != nil || ids(p) != "[s1:true:new] changed 0" {
		t.Errorf("own row gone: got %s, %v", ids(p), err)
	}
	if _, err := inbox.PlanJob(inbox.JobRows{Job: "j1", IDs: []string{"broken"}}, rules, parked.read); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("a failed read: got %v", err)
	}
}

// planTx is an inbox.ReprocessTx that records each statement and finds
// changed the rows named in changed.
type planTx struct {
	calls   []string
	changed map[string]bool
	err     error
}

func (p *planTx) did(call string, id string) (bool, error) {
	p.calls = append(p.calls, call)
	return !p.changed[id], p.err
}

func (p *planTx) Current(_ context.Context, id string) (*inbox.Event, error) {
	return nil, nil
}
func (p *planTx) Park(_ context.Context, id, _ string, reason inbox.Reason) (bool, error) {
	return p.did(fmt.Sprintf("park %s %s", short(id), reason), id)
}
func (p *planTx) StillParked(_ context.Context, id, _ string) (bool, error) {
	return p.did("parked? "+short(id), id)
}
func (p *planTx) Fold(_ context.Context, from, into, _ string) (bool, error) {
	return p.did(fmt.Sprintf("fold %s into %s", short(from), into), from)
}
func (p *planTx) MakeNew(_ context.Context, id, _, key string, _ inbox.Delivery) (bool, error) {
	return p.did(fmt.Sprintf("new %s as %s", short(id), key), id)
}
func (p *planTx) Rekey(_ context.Context, from, to, sha string) error {
	_, err := p.did(fmt.Sprintf("aside %s as %s", from, short(to)), from)
	if sha == "" {
		return errors.New("no sha256")
	}
	return err
}

func short(id string) string { return id[:min(len(id), 12)] }

// TestApply carries a job's plan out through a recording transaction: each
// row as Decide chooses, the job's own row moved aside under its body's
// key before a storable row takes the job's key, a row made new is what
// later rows fold into, a row the store found changed is counted changed
// and changes nothing, and StepChanged never reaches the store.
func TestApply(t *testing.T) {
	ctx := context.Background()
	rules := inbox.Rules{Events: []string{"job.completed"}}
	d1 := inbox.Classify("", inbox.Named{}, []byte(`{"event":"job.completed","job_id":"j1","status":"COMPLETED","n":1}`), 1, rules)
	d2 := inbox.Classify("", inbox.Named{}, []byte(`{"event":"job.completed","job_id":"j1","status":"COMPLETED","n":2}`), 1, rules)
	d3 := inbox.Classify("", inbox.Named{}, []byte(`{"event":"job.completed","job_id":"j1","status":"ERROR"}`), 1, rules)
	odd := inbox.Classify("", inbox.Named{}, []byte(`{"event":"job.odd","job_id":"j1"}`), 1, rules)
	beside := func(d inbox.Delivery) inbox.Reclassified {
		return inbox.Reclassified{Event: inbox.Event{ID: inbox.Beside(d).Key, Source: inbox.SourceOf(d), SHA256: d.SHA256,
			Status: inbox.StatusParked, Reason: inbox.ReasonConflict}, Delivery: d, Selected: true}
	}
	own := inbox.Reclassified{Event: inbox.Event{ID: "j1", Source: inbox.DefaultSource, SHA256: odd.SHA256,
		Status: inbox.StatusParked, Reason: inbox.ReasonUnknownEvent}, Delivery: odd}
	plan := inbox.JobPlan{Job: "j1", Changed: 2, Rows: []inbox.Reclassified{own, beside(d1), beside(d2), beside(d3)}}
	current := own.Event
	tx := &planTx{}
	var rep inbox.ReprocessReport
	if err := plan.Apply(ctx, tx, &current, &rep); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"park j1 unknown_event",
		"parked? " + short(beside(d1).ID),
		"aside j1 as " + short(inbox.BodyKey(odd.SHA256)),
		"new " + short(beside(d1).ID) + " as j1",
		"fold " + short(beside(d2).ID) + " into j1",
		"park " + short(beside(d3).ID) + " conflict",
	}
	if !reflect.DeepEqual(tx.calls, want) {
		t.Errorf("statements:\n got %q\nwant %q", tx.calls, want)
	}
	if rep.Moved != 1 || rep.Folded != 1 || rep.Changed != 2 || rep.JobRows != 1 ||
		rep.Parked[inbox.ReasonUnknownEvent] != 1 || rep.Parked[inbox.ReasonConflict] != 1 {
		t.Errorf("report: got %+v", rep)
	}

	// The store finds the first storable row changed: it is counted so,
	// and the next storable row becomes the job's row instead.
	plan = inbox.JobPlan{Job: "j1", Rows: []inbox.Reclassified{beside(d1), beside(d2)}}
	tx, rep = &planTx{changed: map[string]bool{beside(d1).ID: true}}, inbox.ReprocessReport{}
	if err := plan.Apply(ctx, tx, nil, &rep); err != nil {
		t.Fatal(err)
	}
	want = []string{"new " + short(beside(d1).ID) + " as j1", "new " + short(beside(d2).ID) + " as j1"}
	if !reflect.DeepEqual(tx.calls, want) || rep.Changed != 1 || rep.Moved != 1 {
		t.Errorf("a row changed meanwhile: statements %q, report %+v", tx.calls, rep)
	}

	// The own row changed since it was read: StepChanged, the store is
	// never asked.
	plan = inbox.JobPlan{Job: "j1", Rows: []inbox.Reclassified{{Event: inbox.Event{ID: "j1", SHA256: d1.SHA256}, Delivery: d1, Selected: true}}}
	tx, rep = &planTx{}, inbox.ReprocessReport{}
	if err := plan.Apply(ctx, tx, &inbox.Event{ID: "j1", Status: inbox.StatusParked, SHA256: "other"}, &rep); err != nil || rep.Changed != 1 || len(tx.calls) != 0 {
		t.Errorf("own row changed: statements %q, report %+v, %v", tx.calls, rep, err)
	}

	failed := errors.New("write failed")
	plan = inbox.JobPlan{Job: "j1", Rows: []inbox.Reclassified{beside(d1)}}
	if err := plan.Apply(ctx, &planTx{err: failed}, nil, &inbox.ReprocessReport{}); !errors.Is(err, failed) {
		t.Errorf("a failed statement: got %v", err)
	}
}
