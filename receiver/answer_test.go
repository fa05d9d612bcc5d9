package receiver

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"inbox/inbox"
	"inbox/scheme"
)

// answered is one call of Config.OnAnswer.
type answered struct {
	outcome, reason string
	status          int
}

// recordAnswers makes e's handler record what it reports.
func recordAnswers(e env) func() []answered {
	var mu sync.Mutex
	var got []answered
	e.h.cfg.OnAnswer = func(outcome, reason string, status int, took time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, answered{outcome, reason, status})
	}
	return func() []answered {
		mu.Lock()
		defer mu.Unlock()
		return append([]answered(nil), got...)
	}
}

// TestAnswerReported checks the outcome and reason each request reports to
// metrics, and the log line with the job id.
func TestAnswerReported(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	got := recordAnswers(e)
	badSig := signedRequest(completed, testNow, testSecret)
	badSig.Header.Set("X-Sume-Webhook-Signature", "sume-v1=zz")
	noSig := signedRequest(completed, testNow, testSecret)
	noSig.Header.Del("X-Sume-Webhook-Signature")
	badTS := signedRequest(completed, testNow, testSecret)
	badTS.Header.Set("X-Sume-Webhook-Timestamp", "+1")
	get, _ := http.NewRequest(http.MethodGet, "/webhooks/sume", nil)
	big := signedRequest(strings.Repeat("x", testHardCap+1), testNow, testSecret)

	steps := []struct {
		req  *http.Request
		want answered
	}{
		{signedRequest(completed, testNow, testSecret), answered{"stored", "", 204}},
		{signedRequest(completed, testNow, testSecret), answered{"duplicate", "", 204}},
		{signedRequest(`{"event":"job.exploded","job_id":"job_x"}`, testNow, testSecret), answered{"parked", "unknown_event", 204}},
		{signedRequest(`{"event":"webhook.test"}`, testNow, testSecret), answered{"ignored", "", 204}},
		{signedRequest(completed, testNow, "forged"), answered{"rejected", "mismatch", 401}},
		{signedRequest(completed, testNow.Add(-time.Hour), testSecret), answered{"rejected", "stale_timestamp", 401}},
		{badSig, answered{"rejected", "malformed_signature", 401}},
		{noSig, answered{"rejected", "no_signature", 401}},
		{badTS, answered{"rejected", "bad_timestamp", 401}},
		{get, answered{"rejected", "method", 405}},
		{big, answered{"rejected", "request_too_large", 413}},
	}
	for i, s := range steps {
		if w := e.do(t, s.req); w.Code != s.want.status {
			t.Fatalf("step %d: status %d, want %d", i, w.Code, s.want.status)
		}
	}
	e.h.store = failingStore{err: errors.New("disk I/O error")}
	e.post(t, completed)
	want := []answered{}
	for _, s := range steps {
		want = append(want, s.want)
	}
	want = append(want, answered{"store_error", "", 503})
	if g := got(); len(g) != len(want) {
		t.Fatalf("reported %d answers, want %d: %v", len(g), len(want), g)
	} else {
		for i := range want {
			if g[i] != want[i] {
				t.Errorf("answer %d: got %+v, want %+v", i, g[i], want[i])
			}
		}
	}

	var line struct {
		Status            int
		Outcome, Job, Row string
		Size              int64
		Duration          float64
	}
	first, _, _ := strings.Cut(e.logs.String(), "\n")
	if err := json.Unmarshal([]byte(first), &line); err != nil {
		t.Fatal(err)
	}
	if line.Status != 204 || line.Outcome != "stored" || line.Job != "job_1" || line.Row != "job_1" || line.Size != int64(len(completed)) || line.Duration <= 0 {
		t.Errorf("log line = %+v, from %s", line, first)
	}
}

// blockingStore holds every Put until release is closed.
type blockingStore struct {
	entered chan struct{}
	release chan struct{}
}

func (b blockingStore) Put(_ context.Context, d inbox.Delivery) (inbox.Result, error) {
	b.entered <- struct{}{}
	<-b.release
	return inbox.Result{Outcome: inbox.OutcomeStored, ID: d.Key}, nil
}

// TestInFlightBound fills the bound with requests the store holds, then
// checks the next one is answered 503 with Retry-After at once, and that the
// bound frees up as they finish.
func TestInFlightBound(t *testing.T) {
	t.Parallel()
	const bound = 3
	e := newEnv(t, nil)
	got := recordAnswers(e)
	store := blockingStore{entered: make(chan struct{}), release: make(chan struct{})}
	e.h.store = store
	e.h.cfg.MaxInFlight = bound

	codes := make(chan int, bound)
	for i := range bound {
		go func() {
			body := strings.Replace(completed, "job_1", "job_held"+string(rune('a'+i)), 1)
			codes <- e.do(t, signedRequest(body, testNow, testSecret)).Code
		}()
		<-store.entered
	}
	if n := e.h.InFlight(); n != bound {
		t.Fatalf("in flight = %d, want %d", n, bound)
	}
	w := e.post(t, completed)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Fatalf("beyond the bound: status %d, Retry-After %q; want 503 with Retry-After", w.Code, w.Header().Get("Retry-After"))
	}
	if g := got(); len(g) != 1 || g[0] != (answered{"overloaded", "", 503}) {
		t.Errorf("reported %v, want one overloaded 503", g)
	}
	// Contract row 1 holds under overload too.
	if w := e.do(t, httptest.NewRequest(http.MethodGet, "/webhooks/sume", nil)); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET beyond the bound: status %d, want 405", w.Code)
	}
	close(store.release)
	for range bound {
		if code := <-codes; code != http.StatusNoContent {
			t.Errorf("held request: status %d, want 204", code)
		}
	}
	if n := e.h.InFlight(); n != 0 {
		t.Errorf("in flight after all finished = %d, want 0", n)
	}
	go func() { <-store.entered }()
	if w := e.post(t, completed); w.Code != http.StatusNoContent {
		t.Errorf("after the bound freed: status %d, want 204", w.Code)
	}
}

// TestInFlightSharedAcrossSources gives two handlers one count, as serve
// does for its sources: a request held by one fills the bound for the other.
func TestInFlightSharedAcrossSources(t *testing.T) {
	t.Parallel()
	shared := new(atomic.Int64)
	store := blockingStore{entered: make(chan struct{}), release: make(chan struct{})}
	var handlers []*Handler
	for range 2 {
		h, err := NewHandler(store, Config{
			Keys:        keys(testSecret),
			Scheme:      scheme.Sume{Tolerance: 5 * time.Minute},
			Rules:       inbox.Rules{Events: []string{"job.completed"}, MaxBody: testMaxBody},
			HardCap:     testHardCap,
			MaxInFlight: 1,
			InFlight:    shared,
			Now:         func() time.Time { return testNow },
		}, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		handlers = append(handlers, h)
	}
	serve := func(h *Handler) int {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, signedRequest(completed, testNow, testSecret))
		return w.Code
	}
	held := make(chan int, 1)
	go func() { held <- serve(handlers[0]) }()
	<-store.entered
	second := make(chan int, 1)
	go func() { second <- serve(handlers[1]) }()
	select {
	case code := <-second:
		if code != http.StatusServiceUnavailable {
			t.Errorf("second source while the first holds the bound: status %d, want 503", code)
		}
	case <-store.entered:
		close(store.release)
		t.Fatal("the second source's request reached the store: the bound is not shared")
	}
	if n := handlers[1].InFlight(); n != 1 {
		t.Errorf("in flight seen by the second source = %d, want 1", n)
	}
	close(store.release)
	if code := <-held; code != http.StatusNoContent {
		t.Errorf("held request: status %d, want 204", code)
	}
}
