package inbox_test

import (
	"strings"
	"testing"

	"inbox/inbox"
)

// TestDecide runs the reprocess decision over each state a job's row can
// be in when one of its parked rows classifies again.
func TestDecide(t *testing.T) {
	rules := inbox.Rules{Events: []string{"job.completed"}}
	body := `{"event":"job.completed","job_id":"j1","status":"COMPLETED"}`
	storable := inbox.Classify("", inbox.Named{}, []byte(body), 1, rules)
	unknown := inbox.Classify("", inbox.Named{}, []byte(`{"event":"job.odd","job_id":"j1"}`), 1, rules)
	ping := inbox.Classify("", inbox.Named{}, []byte(`{"event":"webhook.test"}`), 1, rules)
	own := inbox.Event{ID: "j1", Source: "sume", Status: inbox.StatusParked, Reason: inbox.ReasonUnknownEvent, SHA256: unknown.SHA256}
	beside := inbox.Event{ID: "sha256:" + storable.SHA256, Source: "sume", JobID: "j1", Status: inbox.StatusParked, Reason: inbox.ReasonConflict, SHA256: storable.SHA256}
	newRow := func(event, status string) *inbox.Event {
		return &inbox.Event{ID: "j1", Source: "sume", Status: inbox.StatusNew, SHA256: "other", Event: event, JobStatus: status}
	}
	ptr := func(e inbox.Event) *inbox.Event { return &e }
	tests := []struct {
		name string
		job  inbox.ReprocessJob
		row  inbox.Event
		d    inbox.Delivery
		want inbox.Decision
	}{
		{"not storable stays parked with its reason now", inbox.ReprocessJob{Key: "j1", Row: ptr(own)}, own, unknown,
			inbox.Decision{Step: inbox.StepPark, Reason: inbox.ReasonUnknownEvent}},
		{"a ping keeps its recorded reason", inbox.ReprocessJob{Key: "sha256:x"}, inbox.Event{ID: "sha256:x", Reason: inbox.ReasonMissingJobID}, ping,
			inbox.Decision{Step: inbox.StepPark, Reason: inbox.ReasonMissingJobID}},
		{"own row storable becomes new", inbox.ReprocessJob{Key: "j1", Row: ptr(inbox.Event{ID: "j1", Status: inbox.StatusParked, SHA256: storable.SHA256})},
			inbox.Event{ID: "j1", SHA256: storable.SHA256}, storable, inbox.Decision{Step: inbox.StepNew}},
		{"own row changed meanwhile", inbox.ReprocessJob{Key: "j1", Row: ptr(inbox.Event{ID: "j1", Status: inbox.StatusParked, SHA256: "changed"})},
			inbox.Event{ID: "j1", SHA256: storable.SHA256}, storable, inbox.Decision{Step: inbox.StepChanged}},
		{"own row gone", inbox.ReprocessJob{Key: "j1"}, inbox.Event{ID: "j1", SHA256: storable.SHA256}, storable, inbox.Decision{Step: inbox.StepChanged}},
		{"no job row: becomes it", inbox.ReprocessJob{Key: "j1"}, beside, storable, inbox.Decision{Step: inbox.StepNew}},
		{"job row parked and kept: taken over", inbox.ReprocessJob{Key: "j1", Row: ptr(own), Own: ptr(own)}, beside, storable, inbox.Decision{Step: inbox.StepTakeOver}},
		{"job row parked, not kept in this run", inbox.ReprocessJob{Key: "j1", Row: ptr(own)}, beside, storable, inbox.Decision{Step: inbox.StepChanged}},
		{"job row same event: folded", inbox.ReprocessJob{Key: "j1", Row: newRow("job.completed", "COMPLETED")}, beside, storable, inbox.Decision{Step: inbox.StepFold}},
		{"job row other status: conflict", inbox.ReprocessJob{Key: "j1", Row: newRow("job.completed", "ERROR")}, beside, storable,
			inbox.Decision{Step: inbox.StepPark, Reason: inbox.ReasonConflict}},
	}
	for _, tt := range tests {
		got, err := tt.job.Decide(tt.row, tt.d)
		if err != nil || got != tt.want {
			t.Errorf("%s: got %+v, %v; want %+v", tt.name, got, err, tt.want)
		}
	}
	if _, err := (inbox.ReprocessJob{Key: "j2"}).Decide(beside, storable); err == nil || !strings.Contains(err.Error(), `names job "j1", recorded as "j2"`) {
		t.Errorf("a row naming another job: %v", err)
	}
}

// TestAppliedFoldsLaterRows checks the job state after a row became the
// job's new row: a later parked row of the same job, event and status
// folds into it, whatever the source (a source other than sume too).
func TestAppliedFoldsLaterRows(t *testing.T) {
	for _, source := range []string{"", "sume", "acme"} {
		rules := inbox.Rules{Events: []string{"job.completed"}}
		first := inbox.Classify(source, inbox.Named{}, []byte(`{"event":"job.completed","job_id":"j1","status":"COMPLETED","n":1}`), 1, rules)
		second := inbox.Classify(source, inbox.Named{}, []byte(`{"event":"job.completed","job_id":"j1","status":"COMPLETED","n":2}`), 1, rules)
		job := inbox.ReprocessJob{Key: first.Key}
		row1 := inbox.Event{ID: inbox.Beside(first).Key, Source: inbox.SourceOf(first), SHA256: first.SHA256}
		dec, err := job.Decide(row1, first)
		if err != nil || dec.Step != inbox.StepNew {
			t.Fatalf("%q: first row: %+v %v, want StepNew", source, dec, err)
		}
		job = job.Applied(row1, first, dec)
		row2 := inbox.Event{ID: inbox.Beside(second).Key, Source: inbox.SourceOf(second), SHA256: second.SHA256}
		if dec, err := job.Decide(row2, second); err != nil || dec.Step != inbox.StepFold {
			t.Errorf("%q: a later row of the same job and event: %+v %v, want StepFold", source, dec, err)
		}
	}
}

// TestReprocessCount counts each row where it ended.
func TestReprocessCount(t *testing.T) {
	var rep inbox.ReprocessReport
	rep.Count(inbox.Decision{Step: inbox.StepNew}, true)
	rep.Count(inbox.Decision{Step: inbox.StepTakeOver}, true)
	rep.Count(inbox.Decision{Step: inbox.StepFold}, true)
	rep.Count(inbox.Decision{Step: inbox.StepPark, Reason: inbox.ReasonConflict}, true)
	rep.Count(inbox.Decision{Step: inbox.StepPark, Reason: inbox.ReasonConflict}, false)
	rep.Count(inbox.Decision{Step: inbox.StepChanged}, true)
	if rep.Moved != 2 || rep.Folded != 1 || rep.Parked[inbox.ReasonConflict] != 1 || rep.Changed != 2 {
		t.Errorf("got %+v", rep)
	}
}
