package inbox_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"inbox/inbox"
	"inbox/inbox/inboxtest"
)

func TestClassifyKeyed(t *testing.T) {
	rules := inbox.Rules{Events: []string{"push"}, MaxBody: 10}
	tests := []struct {
		name, key, event, body string
		wantKey                string
		wantStatus             inbox.Status
		wantReason             inbox.Reason
	}{
		{"stored", "d1", "push", "{}", "gh/d1", inbox.StatusNew, ""},
		{"no key", "", "push", "{}", "gh/" + inbox.BodyKey("44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"), inbox.StatusParked, inbox.ReasonMissingKey},
		{"control in key", "d\n1", "push", "{}", "gh/" + inbox.BodyKey("44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"), inbox.StatusParked, inbox.ReasonMissingKey},
		{"unknown event", "d1", "ping", "{}", "gh/d1", inbox.StatusParked, inbox.ReasonUnknownEvent},
		{"too large", "d1", "push", "{\"a\":\"0123456789\"}", "gh/d1", inbox.StatusParked, inbox.ReasonTooLarge},
	}
	for _, tt := range tests {
		d := inbox.ClassifyKeyed("gh", tt.key, tt.event, []byte(tt.body), 1, rules)
		if d.Key != tt.wantKey || d.Status != tt.wantStatus || d.Reason != tt.wantReason || d.Source != "gh" {
			t.Errorf("%s: got %s %s %s %s, want %s %s %s gh", tt.name, d.Key, d.Status, d.Reason, d.Source, tt.wantKey, tt.wantStatus, tt.wantReason)
		}
	}
	if d := inbox.ClassifyKeyed("gh", "d1", "anything", []byte("x"), 1, inbox.Rules{}); d.Status != inbox.StatusNew {
		t.Errorf("no event set: %s, want every event stored", d.Status)
	}
	if got := inbox.RowID(inbox.DefaultSource, "job_1"); got != "job_1" {
		t.Errorf("RowID of the default source = %q, want the bare key", got)
	}
}

// TestSourcesKeepTheirRows stores the same key through two sources and a
// Sume job_id that reads like another source's row id: each lands on its
// own row, and a saved response is given again to a repeat.
func TestSourcesKeepTheirRows(t *testing.T) {
	ctx := context.Background()
	s := inboxtest.MustOpen(t, inbox.Options{})
	put := func(d inbox.Delivery) inbox.Result {
		t.Helper()
		res, err := s.Put(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	vibe := inbox.ClassifyKeyed("vibe", "run_1", "scheduled_job.run", []byte(`{"attempt":1}`), 1, inbox.Rules{})
	vibe.Response = []byte(`{"accepted":true}`)
	if res := put(vibe); res.Outcome != inbox.OutcomeStored || res.ID != "vibe/run_1" || string(res.Response) != `{"accepted":true}` {
		t.Fatalf("first vibe delivery: %+v", res)
	}
	again := inbox.ClassifyKeyed("vibe", "run_1", "scheduled_job.run", []byte(`{"attempt":2}`), 2, inbox.Rules{})
	again.Response = []byte(`{"other":true}`)
	if res := put(again); res.Outcome != inbox.OutcomeDuplicate || string(res.Response) != `{"accepted":true}` {
		t.Errorf("repeat: %+v, want a duplicate answered with the saved response", res)
	}
	if res := put(inbox.ClassifyKeyed("gh", "run_1", "push", []byte(`{}`), 1, inbox.Rules{})); res.ID != "gh/run_1" || res.Outcome != inbox.OutcomeStored {
		t.Errorf("same key, other source: %+v", res)
	}
	// A Sume job_id "vibe/run_1" collides with the vibe row's id: parked
	// beside it, never counted on it.
	sume := inbox.Classify([]byte(`{"event":"job.completed","job_id":"vibe/run_1"}`), 1, inbox.Rules{Events: []string{"job.completed"}})
	if res := put(sume); res.Outcome != inbox.OutcomeParked || res.Reason != inbox.ReasonConflict {
		t.Errorf("sume job_id naming a vibe row: %+v, want parked conflict", res)
	}
	e, err := s.Get(ctx, "vibe/run_1")
	if err != nil {
		t.Fatal(err)
	}
	if e.Source != "vibe" || e.Deliveries != 2 || string(e.Response) != `{"accepted":true}` {
		t.Errorf("vibe row: source %s deliveries %d response %s", e.Source, e.Deliveries, e.Response)
	}
	list, err := s.List(ctx, inbox.Filter{Source: "gh"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != "gh/run_1" {
		t.Errorf("list --source gh: %+v", list)
	}
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.BySource["vibe"][inbox.StatusNew] != 1 || st.BySource["sume"][inbox.StatusParked] != 1 {
		t.Errorf("stats by source: %v", st.BySource)
	}
}

func TestSecretUses(t *testing.T) {
	ctx := context.Background()
	s := inboxtest.MustOpen(t, inbox.Options{})
	at := func(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
	if err := s.RecordSecretUses(ctx, []inbox.SecretUse{{"vibe", "aa", at(2000)}, {"vibe", "bb", at(1000)}}); err != nil {
		t.Fatal(err)
	}
	// An older time never replaces a newer one.
	if err := s.RecordSecretUses(ctx, []inbox.SecretUse{{"vibe", "aa", at(1500)}, {"vibe", "bb", at(3000)}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.SecretUses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []inbox.SecretUse{{"vibe", "aa", at(2000)}, {"vibe", "bb", at(3000)}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestKeyedRowsEnterNoPartialIndex checks that a new row of another source
// enters no index but the primary key and the queue, as a Sume row: its
// job_id is its row id, so events_beside_job (job_id <> id) does not take
// it, while a conflict beside it names that row.
func TestKeyedRowsEnterNoPartialIndex(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "inbox.db")
	s := inboxtest.MustOpenPath(t, path, inbox.Options{})
	rules := inbox.Rules{Events: []string{"push"}}
	for _, d := range []inbox.Delivery{
		inbox.ClassifyKeyed("gh", "d1", "push", []byte(`{"a":1}`), 1, rules),
		inbox.ClassifyKeyed("gh", "d1", "ping", []byte(`{"a":2}`), 1, rules), // parked beside d1
	} {
		if _, err := s.Put(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	db, err := sql.Open("sqlite", path+"?_pragma=query_only(ON)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT id, job_id FROM events WHERE job_id <> id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var beside []string
	for rows.Next() {
		var id, job string
		if err := rows.Scan(&id, &job); err != nil {
			t.Fatal(err)
		}
		beside = append(beside, id+" -> "+job)
	}
	if len(beside) != 1 || !strings.HasSuffix(beside[0], " -> gh/d1") {
		t.Errorf("rows in events_beside_job: %v, want only the conflict row, naming gh/d1", beside)
	}
}
