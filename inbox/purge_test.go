package inbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"inbox/inbox"
	"inbox/inbox/inboxtest"
)

// TestPurgeBatches purges more rows than one transaction deletes.
func TestPurgeBatches(t *testing.T) {
	old := time.Now().Add(-48 * time.Hour)
	s := inboxtest.MustOpen(t, inbox.Options{Now: func() time.Time { return old }})
	const n = 2500
	bodies := make([]string, n)
	for i := range bodies {
		bodies[i] = fmt.Sprintf(`{"event":"webhook.test","request_id":"req_%d"}`, i)
	}
	putAll(t, s, append(bodies, `{"event":"job.completed","job_id":"job_1"}`))
	statuses := []inbox.Status{inbox.StatusDone, inbox.StatusIgnored}
	before := time.Now().Add(-24 * time.Hour)

	want, err := s.Purgeable(context.Background(), before, statuses)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Purge(context.Background(), before, statuses)
	if err != nil {
		t.Fatal(err)
	}
	if got.Deleted[inbox.StatusIgnored] != n || want.Deleted[inbox.StatusIgnored] != n {
		t.Errorf("purged %v, counted %v beforehand; want %d ignored", got, want, n)
	}
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.ByStatus[inbox.StatusIgnored] != 0 || st.ByStatus[inbox.StatusNew] != 1 {
		t.Errorf("left %v, want only the new row", st.ByStatus)
	}
}

func TestPurgeRefusesNew(t *testing.T) {
	s := inboxtest.MustOpen(t, inbox.Options{Now: func() time.Time { return time.Now().Add(-48 * time.Hour) }})
	putAll(t, s, []string{`{"event":"job.completed","job_id":"job_1"}`})
	for _, statuses := range [][]inbox.Status{{inbox.StatusNew}, {inbox.StatusDone, inbox.StatusNew}, {"lost"}} {
		if _, err := s.Purge(context.Background(), time.Now(), statuses); err == nil {
			t.Errorf("Purge(%v): no error", statuses)
		}
		if _, err := s.Purgeable(context.Background(), time.Now(), statuses); err == nil {
			t.Errorf("Purgeable(%v): no error", statuses)
		}
	}
	if _, err := s.Get(context.Background(), "job_1"); err != nil {
		t.Errorf("the new row is gone: %v", err)
	}
}
