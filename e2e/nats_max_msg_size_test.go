package e2e

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestNATSStreamMaxMsgSize publishes to a stream whose max_msg_size (2
// KiB) is far below the server's max_payload: a 4 KiB body fits the
// server but never the stream, and its pair is parked
// too_large_for_destination after one attempt, not retried on the
// schedule; a small row beside it is published. serve warns of it at
// start, as of a max_payload below --max-body.
func TestNATSStreamMaxMsgSize(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	b.start()
	b.streamWith(jetstream.StreamConfig{Name: "JOBS", Subjects: []string{"sume.jobs.>"}, MaxMsgSize: 2048})
	db := filepath.Join(t.TempDir(), "inbox.db")
	srv := startServer(t, db, "--nats-url", b.url(), "--nats-subject", natsSubject,
		"--retry-schedule", "200ms,200ms,200ms", "--timeout", "2s", "--lease", "10s")
	waitFor(t, "the max_msg_size warning", func() bool { return strings.Contains(srv.logs.String(), "max_msg_size") })
	for _, body := range []string{
		`{"event":"job.completed","job_id":"big_1","status":"COMPLETED","pad":"` + strings.Repeat("x", 4096) + `"}`,
		`{"event":"job.completed","job_id":"small_1","status":"COMPLETED"}`,
	} {
		if got := send(t, http.DefaultClient, srv.url, body, e2eSecret); got != http.StatusNoContent {
			t.Fatalf("a delivery of %d bytes: %d\n%s", len(body), got, srv.logs)
		}
	}
	waitLong(t, 20*time.Second, "both rows settled", func() bool {
		states, _ := rowStates(t, db)
		return states["done"] == 1 && states["parked"] == 1
	})
	time.Sleep(time.Second) // a retry would come within the schedule's 600 ms
	if r := rowAttempts(t, db)["big_1"]; r.Status != "parked" || r.Attempts != 1 {
		t.Errorf("the 4 KiB row = %+v, want parked after one attempt", r)
	}
	if rows := cliLines(t, "parked", "--db", db, "--reason", "too_large_for_destination", "--json"); len(rows) != 1 || rows[0]["id"] != "big_1" {
		t.Errorf("inbox parked --reason too_large_for_destination = %v, want big_1\n%s", rows, srv.logs)
	}
}
