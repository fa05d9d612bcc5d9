package admin

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"inbox/inbox"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

// dispatched opens path as a dispatcher would, claims every new row and
// settles each with the fate fates gives its id (rows not named stay
// claimed, with no attempt started, until the lease, an hour, runs out).
func dispatched(t *testing.T, path string, now time.Time, fates map[string]inbox.Settlement) {
	t.Helper()
	s := sqlitetest.MustOpenPath(t, path, sqlite.Options{})
	ctx := context.Background()
	jobs, _, err := s.Settle(ctx, "test", nil, inbox.Claim{Now: now, Until: now.Add(time.Hour), Max: 100})
	if err != nil {
		t.Fatal(err)
	}
	var settled []inbox.Settlement
	for _, j := range jobs {
		if st, ok := fates[j.ID]; ok {
			st.Job, st.At = j, now
			settled = append(settled, st)
		}
	}
	if _, _, err := s.Settle(ctx, "test", settled, inbox.Claim{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestStats(t *testing.T) {
	t.Parallel()
	path := newDB(t)
	received := time.Now().Add(-90 * time.Second)
	fill(t, path, received, completed("job_done"), completed("job_retry"), completed("job_held"),
		completed("job_failed"), exploded("job_odd"))
	dispatched(t, path, time.Now(), map[string]inbox.Settlement{
		"job_done":   {Fate: inbox.FateDone},
		"job_retry":  {Fate: inbox.FateRetry, RetryAt: time.Now().Add(time.Hour), Error: "HTTP 503"},
		"job_failed": {Fate: inbox.FatePark, Reason: inbox.ReasonHandlerFailed, Error: "HTTP 500"},
	})

	out, err := run(t, "stats", "--db", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"new        2     1", "done       1     1", "parked     2     1", "dismissed  0     0",
		"waiting         2", "in flight       1", "retrying        1", "oldest waiting  1m3",
		"handler_failed  1", "unknown_event   1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stats has no %q:\n%s", want, out)
		}
	}

	out, err = run(t, "stats", "--db", path, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		ByStatus map[string]int64 `json:"by_status"`
		Attempts map[string]int64 `json:"attempts_by_status"`
		Queue    struct {
			Depth, InFlight, Retrying int64
			OldestAge                 float64 `json:"oldest_waiting_seconds"`
		} `json:"queue"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.ByStatus["new"] != 2 || got.Attempts["parked"] != 1 || got.Queue.Depth != 2 || got.Queue.OldestAge < 90 || got.Queue.OldestAge > 120 {
		t.Errorf("stats --json = %+v", got)
	}
}
