package sume

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)
	const fallback = 4 * time.Second
	tests := []struct {
		header string
		want   time.Duration
	}{
		{"", fallback},
		{"7", 7 * time.Second},
		{" 0 ", 0},
		{"3600", MaxRetryWait},
		{"99999999999999999999", fallback},
		{"-5", fallback},
		{"soon", fallback},
		{now.Add(20 * time.Second).Format(http.TimeFormat), 20 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{now.Add(time.Hour).Format(http.TimeFormat), MaxRetryWait},
		{"Thu, 15 Jan 2027 08:00:09 GMT", 9 * time.Second},
	}
	for _, tt := range tests {
		if got := retryAfter(tt.header, now, fallback); got != tt.want {
			t.Errorf("retryAfter(%q) = %s, want %s", tt.header, got, tt.want)
		}
	}
}

// TestRedeliverRetryAfterDate follows a Retry-After date through a real
// request, with the clock and the sleep injected.
func TestRedeliverRetryAfterDate(t *testing.T) {
	now := time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if calls == 1 {
			w.Header().Set("Retry-After", now.Add(12*time.Second).Format(http.TimeFormat))
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	var waits []time.Duration
	c := &Client{BaseURL: srv.URL + "/", APIKey: "k", Retries: 3, Now: func() time.Time { return now },
		Sleep: func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }}
	if err := c.Redeliver(context.Background(), "job_1"); err != nil {
		t.Fatal(err)
	}
	if calls != 2 || len(waits) != 1 || waits[0] != 12*time.Second {
		t.Errorf("calls %d, waits %v; want 2 calls and one 12s wait", calls, waits)
	}
}

// TestRedeliverStopsWhenCanceled cancels while the client waits to retry:
// the real sleep ends at once.
func TestRedeliverStopsWhenCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		cancel()
		w.Header().Set("Retry-After", "20")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	c := &Client{BaseURL: srv.URL, APIKey: "secret-key", Retries: 3}
	start := time.Now()
	err := c.Redeliver(ctx, "job_1")
	if err == nil || strings.Contains(err.Error(), "secret-key") || calls != 1 {
		t.Errorf("err = %v after %d calls, want a cancellation without the key after 1", err, calls)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s: the wait was not cut short", d)
	}
}
