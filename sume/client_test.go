package sume

import (
	"context"
	"errors"
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

// TestRedeliverStopsWhenCanceled cancels while the client waits, with the
// real sleep, for the Retry-After of a 503: the wait ends at once.
func TestRedeliverStopsWhenCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.Header().Set("Retry-After", "20")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	waiting := make(chan time.Duration, 1)
	c := &Client{BaseURL: srv.URL, APIKey: "secret-key", Retries: 3, Sleep: func(ctx context.Context, d time.Duration) error {
		waiting <- d
		return sleepCtx(ctx, d)
	}}
	go func() {
		// The answer is in and the client waits: cancel now.
		<-waiting
		cancel()
	}()
	start := time.Now()
	err := c.Redeliver(ctx, "job_1")
	if !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "secret-key") || calls != 1 {
		t.Errorf("err = %v after %d calls, want a cancellation without the key after 1", err, calls)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s: the wait was not cut short", d)
	}
}

// TestRedeliverDefaultURL: with no base URL the client posts to the
// provider's API, over https, with the key as a bearer token.
func TestRedeliverDefaultURL(t *testing.T) {
	var got *http.Request
	c := &Client{APIKey: "k", HTTP: &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		got = r
		return &http.Response{StatusCode: http.StatusNoContent, Status: "204 No Content", Body: http.NoBody, Request: r}, nil
	})}}
	if err := c.Redeliver(context.Background(), "job/1"); err != nil {
		t.Fatal(err)
	}
	if want := "https://api.sume.com/v1/jobs/job%2F1/webhook/redeliver"; got.Method != http.MethodPost || got.URL.String() != want ||
		got.Header.Get("Authorization") != "Bearer k" {
		t.Errorf("request %s %s (Authorization %q), want POST %s with the bearer key", got.Method, got.URL, got.Header.Get("Authorization"), want)
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// keyCatcher is an API that records every request, and answers each with a
// redirect to its own /elsewhere.
func keyCatcher(t *testing.T) (*httptest.Server, *[]string) {
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.URL.EscapedPath()+" "+r.Header.Get("Authorization"))
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(srv.Close)
	return srv, &seen
}

// TestRedeliverRefusesDotIDs: "." and ".." survive path escaping, and a
// URL resolves them away: the key would go to another endpoint.
func TestRedeliverRefusesDotIDs(t *testing.T) {
	srv, seen := keyCatcher(t)
	c := &Client{BaseURL: srv.URL, APIKey: "k", Sleep: func(context.Context, time.Duration) error { return nil }}
	for _, id := range []string{"", ".", ".."} {
		if err := c.Redeliver(context.Background(), id); err == nil || !strings.Contains(err.Error(), "invalid job id") {
			t.Errorf("job id %q: err = %v, want invalid job id", id, err)
		}
	}
	if len(*seen) != 0 {
		t.Errorf("requests sent: %q", *seen)
	}
}

// TestRedeliverRefusesRedirects: a redirect is an answer, never followed
// with the key.
func TestRedeliverRefusesRedirects(t *testing.T) {
	srv, seen := keyCatcher(t)
	for _, hc := range []*http.Client{nil, {}} {
		*seen = nil
		c := &Client{BaseURL: srv.URL, APIKey: "k", HTTP: hc}
		err := c.Redeliver(context.Background(), "job_1")
		if err == nil || !strings.Contains(err.Error(), "307") {
			t.Errorf("err = %v, want the 307 as an unexpected answer", err)
		}
		if want := []string{"/v1/jobs/job_1/webhook/redeliver Bearer k"}; strings.Join(*seen, "|") != strings.Join(want, "|") {
			t.Errorf("requests %q, want %q alone", *seen, want)
		}
	}
}

func TestCheck(t *testing.T) {
	for base, ok := range map[string]bool{
		"":                        true,
		"https://api.sume.com":    true,
		"https://api.sume.com/":   true,
		"http://127.0.0.1:8080":   true,
		"http://[::1]:8080/":      true,
		"http://localhost:9000":   true,
		"http://api.sume.com":     false,
		"http://10.0.0.1:8080":    false,
		"http://127.0.0.1.nip.io": false,
		"ftp://api.sume.com":      false,
		"https://":                false,
		"api.sume.com":            false,
	} {
		if err := (&Client{BaseURL: base}).Check(); (err == nil) != ok {
			t.Errorf("Check(%q) = %v, want ok: %v", base, err, ok)
		}
	}
}
