package metrics_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"inbox/inbox"
	"inbox/metrics"
	"inbox/metrics/metricstest"
	"inbox/receiver"
	"inbox/scheme"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
	"inbox/sume"
)

const secret = "whsec_metrics_test"

var now = time.Unix(1_800_000_000, 0)

// heldStore holds the first Put until release is closed, then stores
// through the real store.
type heldStore struct {
	*sqlite.Store
	entered, release chan struct{}
}

func (h heldStore) Put(ctx context.Context, d inbox.Delivery) (inbox.Result, error) {
	h.entered <- struct{}{}
	<-h.release
	return h.Store.Put(ctx, d)
}

// TestMetricsAfterKnownTraffic drives known requests through the real
// handler, store and /metrics, and checks every value.
func TestMetricsAfterKnownTraffic(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	store := sqlitetest.MustOpen(t, sqlite.Options{OnCommit: m.Committed, Now: func() time.Time { return now }})
	// Rows are received at now; the collector looks 90 s later.
	reg.MustRegister(metrics.NewStoreCollector(store, time.Second, func() time.Time { return now.Add(90 * time.Second) }))
	cfg := receiver.Config{
		Keys:     []scheme.Secret{{Key: []byte(secret)}},
		Scheme:   scheme.Sume{Tolerance: time.Minute},
		Rules:    inbox.Rules{Events: []string{"job.completed"}, MaxBody: 1 << 10},
		HardCap:  4 << 10,
		Now:      func() time.Time { return now },
		OnAnswer: m.Answered("sume"),
	}
	h, err := receiver.NewHandler(store, cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	// A second handler on the same metrics, bounded to one request in
	// flight and held in the store, answers the overload.
	held := heldStore{Store: store, entered: make(chan struct{}), release: make(chan struct{})}
	cfg.MaxInFlight = 1
	bounded, err := receiver.NewHandler(held, cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	metrics.InFlight(reg, bounded.InFlight)
	mux := http.NewServeMux()
	mux.Handle("/webhooks/sume", h)
	mux.Handle("/bounded", bounded)
	mux.Handle("GET /metrics", metrics.Handler(reg, zerolog.Nop()))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	post := func(path, body, key string, want int) {
		t.Helper()
		ts := strconv.FormatInt(now.Unix(), 10)
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
		req.Header.Set(sume.HeaderTimestamp, ts)
		req.Header.Set(sume.HeaderSignature, sume.SignatureHeader(ts, []byte(body), key))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s: status %d, want %d", body, resp.StatusCode, want)
		}
	}
	job := func(id string) string {
		return `{"event":"job.completed","job_id":"` + id + `","status":"COMPLETED"}`
	}
	post("/webhooks/sume", job("job_1"), secret, 204)
	post("/webhooks/sume", job("job_2"), secret, 204)
	post("/webhooks/sume", job("job_1"), secret, 204)                                            // duplicate
	post("/webhooks/sume", `{"event":"job.exploded","job_id":"job_3"}`, secret, 204)             // parked unknown_event
	post("/webhooks/sume", `{"event":"job.completed"}`, secret, 204)                             // parked missing_job_id
	post("/webhooks/sume", `{"event":"webhook.test"}`, secret, 204)                              // ignored
	post("/webhooks/sume", job("job_4"), "forged", 401)                                          // mismatch
	post("/webhooks/sume", job("job_5"), "forged", 401)                                          // mismatch
	if resp, err := http.Get(srv.URL + "/webhooks/sume"); err != nil || resp.StatusCode != 405 { // method
		t.Fatalf("GET: %v %v", resp, err)
	}

	done := make(chan struct{})
	go func() { post("/bounded", job("job_held"), secret, 204); close(done) }()
	<-held.entered
	post("/bounded", job("job_6"), secret, 503) // overloaded
	got := metricstest.Scrape(t, srv.URL+"/metrics")
	if got["inbox_requests_in_flight"] != 1 {
		t.Errorf("in flight while one is held = %v, want 1", got["inbox_requests_in_flight"])
	}
	close(held.release)
	<-done
	store.Close()
	post("/webhooks/sume", job("job_7"), secret, 503) // store error: the store is closed

	got = metricstest.Scrape(t, srv.URL+"/metrics")
	want := map[string]float64{
		`inbox_deliveries_total{outcome="stored",reason="",source="sume"}`:               3, // job_1, job_2, job_held
		`inbox_deliveries_total{outcome="duplicate",reason="",source="sume"}`:            1,
		`inbox_deliveries_total{outcome="parked",reason="unknown_event",source="sume"}`:  1,
		`inbox_deliveries_total{outcome="parked",reason="missing_job_id",source="sume"}`: 1,
		`inbox_deliveries_total{outcome="ignored",reason="",source="sume"}`:              1,
		`inbox_deliveries_total{outcome="rejected",reason="mismatch",source="sume"}`:     2,
		`inbox_deliveries_total{outcome="rejected",reason="method",source="sume"}`:       1,
		`inbox_deliveries_total{outcome="overloaded",reason="",source="sume"}`:           1,
		`inbox_deliveries_total{outcome="store_error",reason="",source="sume"}`:          1,
		`inbox_request_duration_seconds_count{code="204"}`:                               7,
		`inbox_request_duration_seconds_count{code="401"}`:                               2,
		`inbox_request_duration_seconds_count{code="405"}`:                               1,
		`inbox_request_duration_seconds_count{code="503"}`:                               2,
		`inbox_request_duration_seconds_bucket{code="401",le="10"}`:                      2,
		`inbox_commit_batch_size_count`:                                                  7,
		`inbox_commit_batch_size_sum`:                                                    7,
		`inbox_commit_batch_size_bucket{le="1"}`:                                         7,
		`inbox_commit_duration_seconds_count`:                                            7,
		`inbox_commit_errors_total`:                                                      0,
		`inbox_requests_in_flight`:                                                       0,
	}
	metricstest.Expect(t, got, want)
	if n := metricstest.Sum(got, "inbox_deliveries_total"); n != 12 {
		t.Errorf("deliveries add up to %v, want the 12 requests", n)
	}
	// The store is closed: its gauges are left out, the rest is served.
	if _, ok := got[`inbox_rows{status="new"}`]; ok {
		t.Errorf("rows reported from a closed store")
	}
}

// TestStoreGauges checks rows by status, parked rows by reason and the age
// of the oldest parked row, read at scrape time.
func TestStoreGauges(t *testing.T) {
	clock := now
	store := sqlitetest.MustOpen(t, sqlite.Options{Now: func() time.Time { return clock }})
	rules := inbox.Rules{Events: []string{"job.completed"}}
	put := func(body string) {
		t.Helper()
		if _, err := store.Put(context.Background(), inbox.Classify("", inbox.Named{}, []byte(body), now.Unix(), rules)); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewStoreCollector(store, time.Second, func() time.Time { return now.Add(time.Hour) }))
	srv := httptest.NewServer(metrics.Handler(reg, zerolog.Nop()))
	defer srv.Close()

	got := metricstest.Scrape(t, srv.URL)
	if got[`inbox_oldest_parked_age_seconds`] != 0 || got[`inbox_rows{status="new"}`] != 0 || got[`inbox_parked_rows{reason="conflict"}`] != 0 {
		t.Errorf("empty store: %v", got)
	}

	put(`not json`) // parked at now
	clock = now.Add(10 * time.Minute)
	put(`{"event":"job.completed","job_id":"job_1"}`)
	put(`{"event":"job.exploded","job_id":"job_2"}`)
	put(`{"event":"job.exploded","job_id":"job_3"}`)
	put(`{"event":"webhook.test"}`)

	got = metricstest.Scrape(t, srv.URL)
	want := map[string]float64{
		`inbox_rows{status="new"}`:                   1,
		`inbox_rows{status="done"}`:                  0,
		`inbox_rows{status="parked"}`:                3,
		`inbox_rows{status="ignored"}`:               1,
		`inbox_parked_rows{reason="unknown_event"}`:  2,
		`inbox_parked_rows{reason="unparseable"}`:    1,
		`inbox_parked_rows{reason="missing_job_id"}`: 0,
		`inbox_oldest_parked_age_seconds`:            3600, // the unparseable row, received at now
		`inbox_queue_depth`:                          1,
		`inbox_queue_in_flight`:                      0,
		`inbox_queue_oldest_age_seconds`:             3000, // job_1, received at now+10m
	}
	metricstest.Expect(t, got, want)
}
