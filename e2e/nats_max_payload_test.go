package e2e

import (
	"database/sql"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestNATSMaxPayload serves with the default --max-body (1 MiB) and a
// NATS destination whose server keeps its default max_payload (1 MiB):
// serve warns at start that a body that large can never be published,
// and a verified body of exactly 1,048,576 bytes, which can never fit
// with its headers, is parked too_large_for_destination after one
// attempt, not retried on the schedule; a small one beside it is
// published. inbox dispatch warns at start as serve does.
func TestNATSMaxPayload(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	b.start()
	b.stream()
	db := filepath.Join(t.TempDir(), "inbox.db")
	srv := startServer(t, db, "--nats-url", b.url(), "--nats-subject", natsSubject,
		"--retry-schedule", "200ms,200ms,200ms", "--timeout", "2s", "--lease", "10s")
	waitFor(t, "the max_payload warning", func() bool { return strings.Contains(srv.logs.String(), "max_payload") })
	if !strings.Contains(srv.logs.String(), "too_large_for_destination") {
		t.Errorf("the warning at start does not say what becomes of the rows:\n%s", srv.logs)
	}

	head := `{"event":"job.completed","job_id":"big_1","status":"COMPLETED","pad":"`
	tail := `"}`
	big := head + strings.Repeat("x", 1<<20-len(head)-len(tail)) + tail
	if len(big) != 1<<20 {
		t.Fatalf("body of %d bytes", len(big))
	}
	if got := send(t, http.DefaultClient, srv.url, big, e2eSecret); got != http.StatusNoContent {
		t.Fatalf("the 1 MiB delivery: %d\n%s", got, srv.logs)
	}
	if got := send(t, http.DefaultClient, srv.url, `{"event":"job.completed","job_id":"small_1","status":"COMPLETED"}`, e2eSecret); got != http.StatusNoContent {
		t.Fatalf("the small delivery: %d", got)
	}
	waitLong(t, 20*time.Second, "both rows settled", func() bool {
		states, _ := rowStates(t, db)
		return states["done"] == 1 && states["parked"] == 1
	})
	// A retry would come within the schedule's 600 ms.
	time.Sleep(time.Second)
	rows := rowAttempts(t, db)
	if r := rows["big_1"]; r.Status != "parked" || r.Attempts != 1 {
		t.Errorf("the 1 MiB row = %+v, want parked after one attempt", r)
	}
	if r := rows["small_1"]; r.Status != "done" {
		t.Errorf("the small row = %+v, want done", r)
	}
	var reason string
	eachRow(t, db, `SELECT coalesce(reason, '') FROM deliveries WHERE event_id = 'big_1'`, func(rs *sql.Rows) error {
		return rs.Scan(&reason)
	})
	if reason != "too_large_for_destination" {
		t.Errorf("the 1 MiB row's pair is parked %q, want too_large_for_destination", reason)
	}
	if got := b.messages(); len(got["big_1"]) != 0 || len(got["small_1"]) != 1 {
		t.Errorf("the stream holds %v, want small_1 once and no big_1", fmt.Sprint(len(got["big_1"]), len(got["small_1"])))
	}
	if rows := cliLines(t, "parked", "--db", db, "--reason", "too_large_for_destination", "--json"); len(rows) != 1 || rows[0]["id"] != "big_1" {
		t.Errorf("inbox parked --reason too_large_for_destination = %v, want big_1", rows)
	}
	// inbox dispatch warns too, with --max-body's default in mind.
	d := startDispatch(t, "--db", db, "--nats-url", b.url(), "--nats-subject", natsSubject)
	waitFor(t, "inbox dispatch's max_payload warning", func() bool { return strings.Contains(d.logs.String(), "too_large_for_destination") })
	d.kill(syscall.SIGTERM)
}
