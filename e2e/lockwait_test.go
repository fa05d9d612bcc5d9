package e2e

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"inbox/sqlite/sqlitetest"
)

// TestLockedAnswerWithinBusyTimeout holds the write lock from another
// process while deliveries arrive one after another: each gets its 503,
// with Retry-After, within --busy-timeout plus half a second of being sent,
// however long the ones before it have been waiting.
func TestLockedAnswerWithinBusyTimeout(t *testing.T) {
	const busy = time.Second
	db := filepath.Join(t.TempDir(), "inbox.db")
	srv := startServer(t, db, "--busy-timeout", busy.String())
	sqlitetest.HoldWriteLock(t, db)

	type answer struct {
		status     int
		retryAfter string
		took       time.Duration
	}
	const n = 8
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			// One every 200ms: each arrives while the ones before it wait.
			time.Sleep(time.Duration(i) * 200 * time.Millisecond)
			client := &http.Client{Timeout: 4 * busy}
			start := time.Now()
			status, retryAfter := post(context.Background(), client, srv.url, job("job_locked_"+string(rune('a'+i))))
			answers[i] = answer{status, retryAfter, time.Since(start)}
		})
	}
	wg.Wait()
	var slowest time.Duration
	var took []string
	for i, a := range answers {
		slowest = max(slowest, a.took)
		took = append(took, a.took.Round(time.Millisecond).String())
		if a.status != http.StatusServiceUnavailable || a.retryAfter == "" {
			t.Errorf("delivery %d: status %d, Retry-After %q; want 503 with Retry-After", i, a.status, a.retryAfter)
		}
	}
	t.Logf("--busy-timeout %s, lock held: 503 after %s; slowest %s", busy, strings.Join(took, ", "), slowest.Round(time.Millisecond))
	if bound := busy + 500*time.Millisecond; slowest > bound {
		t.Errorf("the slowest 503 took %s, want within --busy-timeout + 0.5s = %s", slowest, bound)
	}
}

// TestBusyTimeoutFitsWriteDeadline: serve refuses, with one line, a
// --busy-timeout after which a 503 could not be written before the write
// deadline (--read-timeout + 1s), and one that is not positive; a longer
// --read-timeout makes room for it.
func TestBusyTimeoutFitsWriteDeadline(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inbox.db")
	for _, tt := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"--busy-timeout", "9s"}, "write deadline"},
		{nil, []string{"--busy-timeout", "8001ms"}, "write deadline"},
		{nil, []string{"--read-header-timeout", "2s", "--read-timeout", "3s", "--busy-timeout", "3500ms"}, "write deadline"},
		{[]string{"INBOX_BUSY_TIMEOUT=20s"}, nil, "write deadline"},
		{nil, []string{"--busy-timeout", "0s"}, "at least 1ms"},
		{nil, []string{"--busy-timeout", "-1s"}, "at least 1ms"},
	} {
		out, errOut, code := runServeBriefly(t, tt.env, db, tt.args...)
		if code <= 0 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "--busy-timeout") || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v %v: exit %d, stdout %q, stderr %q; want a one-line refusal saying %q", tt.env, tt.args, code, out, errOut, tt.want)
		}
	}
	// Refused before anything was made.
	if rows, _ := filepath.Glob(db + "*"); len(rows) != 0 {
		t.Errorf("the refusals left %v", rows)
	}
	startServer(t, db, "--busy-timeout", "8s")
	startServer(t, filepath.Join(t.TempDir(), "inbox.db"), "--read-timeout", "12s", "--busy-timeout", "10s")
}
