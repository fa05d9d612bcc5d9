package e2e

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"inbox/metrics/metricstest"
	"inbox/sqlite/sqlitetest"
)

// get returns the status and body of a GET.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestProbesAndMetrics runs the binary with --admin-addr, drives known
// traffic at it, and checks the probes and the exact metric values.
func TestProbesAndMetrics(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inbox.db")
	srv := startServer(t, db, "--admin-addr", "127.0.0.1:0", "--busy-timeout", "100ms")
	if srv.admin == strings.TrimSuffix(srv.url, "/webhooks/sume") {
		t.Fatal("admin endpoint on the webhook address")
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := get(t, srv.admin+path); code != 200 || body != "ok\n" {
			t.Errorf("%s: %d %q, want 200 ok", path, code, body)
		}
	}
	// With --admin-addr the probes do not face the webhook address.
	webhooks := strings.TrimSuffix(srv.url, "/webhooks/sume")
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if code, _ := get(t, webhooks+path); code != http.StatusNotFound {
			t.Errorf("%s on the webhook address: %d, want 404", path, code)
		}
	}

	post := func(body, secret string, want int) {
		t.Helper()
		if got := send(t, http.DefaultClient, srv.url, body, secret); got != want {
			t.Fatalf("%s: status %d, want %d", body, got, want)
		}
	}
	post(job("job_1"), e2eSecret, 204)
	post(job("job_2"), e2eSecret, 204)
	post(job("job_1"), e2eSecret, 204)                                // duplicate
	post(`{"event":"job.exploded","job_id":"job_3"}`, e2eSecret, 204) // parked unknown_event
	post(`not json`, e2eSecret, 204)                                  // parked unparseable
	post(job("job_4"), "forged", 401)                                 // mismatch
	stale, _ := roundTrip(t, srv.url, rawRequest("POST", "/webhooks/sume", signedHeaders(job("job_5"), time.Now().Add(-time.Hour), e2eSecret), job("job_5")))
	if stale.StatusCode != 401 {
		t.Fatalf("stale: %d, want 401", stale.StatusCode)
	}
	if code, _ := get(t, srv.url); code != 405 {
		t.Fatalf("GET: %d, want 405", code)
	}

	// Another process holds the write lock: a delivery gets 503 and the
	// store is not ready.
	release := sqlitetest.HoldWriteLock(t, db)
	post(job("job_locked"), e2eSecret, 503)
	if code, _ := get(t, srv.admin+"/readyz"); code != 503 {
		t.Errorf("/readyz with the write lock held: %d, want 503", code)
	}
	if code, _ := get(t, srv.admin+"/healthz"); code != 200 {
		t.Errorf("/healthz with the write lock held: %d, want 200", code)
	}
	release()
	if code, _ := get(t, srv.admin+"/readyz"); code != 200 {
		t.Errorf("/readyz after the lock was released: %d, want 200", code)
	}

	got := metricstest.Scrape(t, srv.admin+"/metrics")
	want := map[string]float64{
		`inbox_deliveries_total{outcome="stored",reason="",source="sume"}`:                  2,
		`inbox_deliveries_total{outcome="duplicate",reason="",source="sume"}`:               1,
		`inbox_deliveries_total{outcome="parked",reason="unknown_event",source="sume"}`:     1,
		`inbox_deliveries_total{outcome="parked",reason="unparseable",source="sume"}`:       1,
		`inbox_deliveries_total{outcome="rejected",reason="mismatch",source="sume"}`:        1,
		`inbox_deliveries_total{outcome="rejected",reason="stale_timestamp",source="sume"}`: 1,
		`inbox_deliveries_total{outcome="rejected",reason="method",source="sume"}`:          1,
		`inbox_deliveries_total{outcome="store_error",reason="",source="sume"}`:             1,
		`inbox_request_duration_seconds_count{code="204"}`:                                  5,
		`inbox_request_duration_seconds_count{code="401"}`:                                  2,
		`inbox_request_duration_seconds_count{code="405"}`:                                  1,
		`inbox_request_duration_seconds_count{code="503"}`:                                  1,
		`inbox_commit_batch_size_sum`:                                                       5,
		`inbox_commit_batch_size_count`:                                                     5,
		`inbox_commit_duration_seconds_count`:                                               6,
		`inbox_commit_errors_total`:                                                         1,
		`inbox_requests_in_flight`:                                                          0,
		`inbox_rows{status="new"}`:                                                          2,
		`inbox_rows{status="parked"}`:                                                       2,
		`inbox_rows{status="done"}`:                                                         0,
		`inbox_rows{status="ignored"}`:                                                      0,
		`inbox_parked_rows{reason="unknown_event"}`:                                         1,
		`inbox_parked_rows{reason="unparseable"}`:                                           1,
		`inbox_parked_rows{reason="conflict"}`:                                              0,
		`inbox_queue_depth`:                                                                 2, // without a destination too
		`inbox_queue_in_flight`:                                                             0,
	}
	metricstest.Expect(t, got, want)
	if n := metricstest.Sum(got, "inbox_deliveries_total"); n != 9 {
		t.Errorf("deliveries add up to %v, want the 9 webhook requests", n)
	}
	if age := got["inbox_oldest_parked_age_seconds"]; age <= 0 || age > 60 {
		t.Errorf("oldest parked age = %v s, want a few seconds", age)
	}
	for _, k := range []string{"go_goroutines", "process_open_fds", "process_resident_memory_bytes"} {
		if _, ok := got[k]; !ok {
			t.Errorf("%s missing: the runtime collectors are not registered", k)
		}
	}
}
