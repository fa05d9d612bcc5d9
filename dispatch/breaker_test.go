package dispatch

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"inbox/inbox"
)

var (
	err500 = errors.New("HTTP 500 Internal Server Error: boom")
	t0     = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
)

func job(id string, attempt int) inbox.Job { return inbox.Job{ID: id, Attempt: attempt} }

// TestBreakerPoisonAmongGood: a row failing while others succeed is the
// row's every time, to its last attempt: the destination stays up.
func TestBreakerPoisonAmongGood(t *testing.T) {
	t.Parallel()
	b := newBreaker()
	for attempt := 1; attempt <= 3; attempt++ {
		if v, _, tripped, _ := b.failed(job("poison", attempt), err500, attempt == 3, t0); v != verdictRow || tripped {
			t.Fatalf("attempt %d: verdict %v tripped %v, want the row's", attempt, v, tripped)
		}
		b.succeeded("good")
		b.succeeded("good2")
	}
}

// TestBreakerSameFailureAcrossRows: the same failure for breakerRows
// different rows in a row brings the destination down; the row that did
// is given back, later attempts wait for the probe, one at a time, and a
// success brings it up.
func TestBreakerSameFailureAcrossRows(t *testing.T) {
	t.Parallel()
	b := newBreaker()
	for i, id := range []string{"a", "a", "b"} {
		if v, _, _, _ := b.failed(job(id, i+1), err500, false, t0); v != verdictRow {
			t.Fatalf("failure %d: verdict %v, want the row's", i, v)
		}
	}
	v, due, tripped, _ := b.failed(job("c", 1), err500, false, t0)
	if v != verdictDown || !tripped || due.Before(t0.Add(firstProbe)) {
		t.Fatalf("third row: verdict %v tripped %v due %v, want down", v, tripped, due)
	}
	if b.ready(t0) == nil || b.admit("d", t0) {
		t.Error("an attempt may start while down before the probe is due")
	}
	at := t0.Add(firstProbe)
	if b.ready(at) != nil || !b.admit("d", at) || b.admit("e", at) {
		t.Error("the probe: want one attempt admitted once due")
	}
	if v, due, _, _ := b.failed(job("d", 1), err500, true, at); v != verdictDown || !due.Equal(at.Add(firstProbe*3/2)) {
		t.Errorf("the failed probe: verdict %v due %v, want down, the interval grown by half", v, due)
	}
	if !b.succeeded("e") {
		t.Error("a success did not bring it up")
	}
	if b.ready(at) != nil || !b.admit("f", at) {
		t.Error("up: attempts wait")
	}
}

// TestBreakerUnsureLast: a row's last attempt failing as another row's
// just did is given back once, then parked as the row's.
func TestBreakerUnsureLast(t *testing.T) {
	t.Parallel()
	b := newBreaker()
	b.failed(job("a", 1), err500, false, t0)
	if v, _, _, _ := b.failed(job("z", 3), err500, true, t0); v != verdictUnsure {
		t.Fatalf("verdict %v, want unsure", v)
	}
	b.succeeded("a")
	b.failed(job("a", 2), err500, false, t0)
	if v, _, _, _ := b.failed(job("z", 3), err500, true, t0); v != verdictRow {
		t.Fatalf("verdict %v, want the row's the second time", v)
	}
}

// TestBreakerSuspect: a row whose timeout brought the destination down,
// after which the next row went through at once, has its next timeout
// counted as its own: a row that hangs the application alone is parked
// after its schedule, not held forever.
func TestBreakerSuspect(t *testing.T) {
	t.Parallel()
	b := newBreaker()
	timeout := Down(errors.New("timed out after 30s"), 0)
	if _, _, tripped, _ := b.failed(job("hang", 1), timeout, false, t0); !tripped {
		t.Fatal("a timeout did not bring it down")
	}
	b.admit("good", t0.Add(firstProbe))
	b.succeeded("good")
	if v, _, tripped, _ := b.failed(job("hang", 1), timeout, false, t0); v != verdictRow || tripped {
		t.Errorf("verdict %v tripped %v, want the row's", v, tripped)
	}
}

// TestBreakerRetryAfter: a Retry-After holds the probe, bounded.
func TestBreakerRetryAfter(t *testing.T) {
	t.Parallel()
	b := newBreaker()
	_, due, _, _ := b.failed(job("a", 1), Down(err500, 4*time.Second), false, t0)
	if !due.Equal(t0.Add(4 * time.Second)) {
		t.Errorf("due %v, want 4s on", due)
	}
	if b.admit("b", t0.Add(3*time.Second)) {
		t.Error("probed before Retry-After")
	}
	if o := Down(err500, 1000*time.Hour); retryAfter(o) != maxRetryAfter {
		t.Errorf("Retry-After not bounded: %v", retryAfter(o))
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want time.Duration
	}{
		{"4", 4 * time.Second},
		{" 120 ", 2 * time.Minute},
		{"0", 0},
		{"-3", 0},
		{"soon", 0},
		{"", 0},
		{"99999999999", maxRetryAfter},
		{t0.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{t0.Add(-time.Hour).Format(http.TimeFormat), 0},
		{t0.Add(72 * time.Hour).Format(http.TimeFormat), maxRetryAfter},
	} {
		if got := ParseRetryAfter(c.in, t0); got != c.want {
			t.Errorf("ParseRetryAfter(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestRetry(t *testing.T) {
	t.Parallel()
	r := NewRetry([]time.Duration{time.Second, 5 * time.Second})
	if r.Attempts() != 3 || r.Last(2) || !r.Last(3) || !r.Last(9) || r.Wait(1) != time.Second || r.Wait(2) != 5*time.Second || r.Wait(7) != 5*time.Second {
		t.Errorf("retry %+v", r)
	}
	if n := NewRetry([]time.Duration{}); n.Retries() || !n.Last(1) || n.Wait(1) != 0 {
		t.Errorf("none %+v", n)
	}
}

// TestBreakerResume: a breaker started from a recorded outage keeps its
// since, probes at once with one row, and comes up on a success.
func TestBreakerResume(t *testing.T) {
	t.Parallel()
	b := newBreaker()
	b.resume(t0, "connection refused")
	if since, _, due := b.down(t0.Add(time.Second)); !since.Equal(t0) || !due {
		t.Fatalf("down since %v, probe due %v", since, due)
	}
	if !b.admit("a", t0) || b.admit("b", t0) {
		t.Error("want one probe at once")
	}
	if !b.succeeded("a") || b.admit("b", t0) == false {
		t.Error("a success did not bring it up")
	}
}

// TestBreakerProbeAnsweredOtherwise: a destination down for a timeout
// whose probe gets an answer (a failure of the row's own, not the one
// that brought it down) is up again: the probe's failure counts for its
// row, and the next attempts go at full speed rather than a probe a
// minute. A probe that meets the same failure keeps it down.
func TestBreakerProbeAnsweredOtherwise(t *testing.T) {
	t.Parallel()
	b := newBreaker()
	timeout := timedOut(errors.New("timed out after 1s"))
	if _, _, tripped, _ := b.failed(job("slow", 1), timeout, false, t0); !tripped {
		t.Fatal("a timeout did not bring it down")
	}
	at := t0.Add(firstProbe)
	if !b.admit("p1", at) {
		t.Fatal("no probe admitted")
	}
	if v, _, _, up := b.failed(job("p1", 1), timeout, false, at); v != verdictDown || up {
		t.Fatalf("a probe timing out again: verdict %v up %v, want still down", v, up)
	}
	at = at.Add(time.Minute)
	if !b.admit("p2", at) {
		t.Fatal("no second probe admitted")
	}
	own := errors.New("HTTP 500 Internal Server Error: cannot take row p2")
	v, _, tripped, up := b.failed(job("p2", 1), own, false, at)
	if v != verdictRow || tripped || !up {
		t.Fatalf("a probe answered with the row's own failure: verdict %v tripped %v up %v, want the row's, and up", v, tripped, up)
	}
	if b.ready(at) != nil || !b.admit("next", at) || !b.admit("next2", at) {
		t.Error("up again: attempts still wait for a probe")
	}

	// Down for the same failure across rows: a probe meeting it again
	// keeps it down.
	b = newBreaker()
	for _, id := range []string{"a", "b", "c"} {
		b.failed(job(id, 1), err500, false, t0)
	}
	at = t0.Add(firstProbe)
	if !b.admit("d", at) {
		t.Fatal("no probe admitted")
	}
	if v, _, _, up := b.failed(job("d", 1), err500, false, at); v != verdictDown || up {
		t.Errorf("a probe meeting the failure that brought it down: verdict %v up %v, want still down", v, up)
	}
}
