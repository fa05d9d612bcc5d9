package e2e

import (
	"context"
	"database/sql"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestNATSStreamMaxMsgSize publishes to a stream whose max_msg_size (2
// KiB) is far below the server's max_payload: a 4 KiB body fits the
// server but never the stream, and its pair is parked
// too_large_for_destination after one attempt, not retried on the
// schedule; a small row beside it is published.
func TestNATSStreamMaxMsgSize(t *testing.T) {
	b := newBroker(t)
	b.start()
	nc, err := natsgo.Connect(b.url())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateStream(context.Background(), jetstream.StreamConfig{
		Name: "JOBS", Subjects: []string{"sume.jobs.>"}, Duplicates: 2 * time.Minute, MaxMsgSize: 2048,
	}); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "inbox.db")
	srv := startServer(t, db, "--nats-url", b.url(), "--nats-subject", natsSubject,
		"--retry-schedule", "200ms,200ms,200ms", "--timeout", "2s", "--lease", "10s")

	big := `{"event":"job.completed","job_id":"big_1","status":"COMPLETED","pad":"` + strings.Repeat("x", 4096) + `"}`
	if got := send(t, http.DefaultClient, srv.url, big, e2eSecret); got != http.StatusNoContent {
		t.Fatalf("the 4 KiB delivery: %d\n%s", got, srv.logs)
	}
	if got := send(t, http.DefaultClient, srv.url, `{"event":"job.completed","job_id":"small_1","status":"COMPLETED"}`, e2eSecret); got != http.StatusNoContent {
		t.Fatalf("the small delivery: %d", got)
	}
	waitLong(t, 20*time.Second, "both rows settled", func() bool {
		states, _ := rowStates(t, db)
		return states["done"] == 1 && states["parked"] == 1
	})
	time.Sleep(time.Second) // a retry would come within the schedule's 600 ms
	rows := rowAttempts(t, db)
	if r := rows["big_1"]; r.Status != "parked" || r.Attempts != 1 {
		t.Errorf("the 4 KiB row = %+v, want parked after one attempt", r)
	}
	var reason string
	eachRow(t, db, `SELECT coalesce(reason, '') FROM deliveries WHERE event_id = 'big_1'`, func(rs *sql.Rows) error {
		return rs.Scan(&reason)
	})
	if reason != "too_large_for_destination" {
		t.Errorf("the 4 KiB row's pair is parked %q, want too_large_for_destination\n%s", reason, srv.logs)
	}
}
