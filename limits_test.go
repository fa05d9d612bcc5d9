package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestSlowClients opens 1,000 connections that trickle their headers a
// byte at a time, and checks that the server closes each of them once
// --read-header-timeout has passed, while valid deliveries sent meanwhile
// keep getting 204.
func TestSlowClients(t *testing.T) {
	const (
		tricklers     = 1000
		headerTimeout = time.Second
		// The server closes a trickler headerTimeout after accepting it;
		// slack for accepting a thousand connections on a small machine.
		closeBound = headerTimeout + 1500*time.Millisecond
	)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	// Go raises the soft limit to the hard one at start, in this process and
	// in the server's: each needs a descriptor per connection and some.
	if need := uint64(tricklers + 500); lim.Cur < need {
		t.Skipf("open files limited to %d (ulimit -Hn), need %d for %d connections", lim.Cur, need, tricklers)
	}
	db := filepath.Join(t.TempDir(), "inbox.db")
	srv := startServer(t, db, "--read-header-timeout", headerTimeout.String())
	u, _ := url.Parse(srv.url)

	type result struct {
		lived time.Duration
		got   string // what the server sent back before closing
		err   error
	}
	results := make(chan result, tricklers)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	dials := make(chan struct{}, 50) // dial at most 50 at once
	for range tricklers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dials <- struct{}{}
			c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
			<-dials
			if err != nil {
				results <- result{err: err}
				return
			}
			defer c.Close()
			start := time.Now()
			go func() {
				// A header that never ends, one byte every 100 ms.
				line := "POST /webhooks/sume HTTP/1.1\r\nHost: inbox.test\r\nX-Slow: " + strings.Repeat("a", 200)
				for i := 0; ctx.Err() == nil && i < len(line); i++ {
					if _, err := c.Write([]byte{line[i]}); err != nil {
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
			}()
			c.SetReadDeadline(start.Add(5 * time.Second))
			got, err := io.ReadAll(c) // until the server closes
			results <- result{lived: time.Since(start), got: string(got), err: err}
		}()
	}

	// Valid deliveries, one after another, while the tricklers hang on.
	var ok, other int
	var slowest time.Duration
	client := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(closeBound)
	for i := 0; time.Now().Before(deadline); i++ {
		start := time.Now()
		if code := send(t, client, srv.url, job(fmt.Sprintf("job_during_%d", i)), e2eSecret); code == http.StatusNoContent {
			ok++
		} else {
			other++
		}
		slowest = max(slowest, time.Since(start))
	}
	wg.Wait()
	close(results)

	var closed int
	var longest, shortest time.Duration = 0, time.Hour
	for r := range results {
		var ne net.Error
		switch {
		case errors.As(r.err, &ne) && ne.Timeout():
			// Still open when the client gave up: not closed in time.
		case r.err != nil && !errors.Is(r.err, syscall.ECONNRESET):
			t.Errorf("trickler: %v", r.err)
		case r.lived <= closeBound:
			closed++ // an EOF, or a reset: the client was still sending
		}
		// Go closes silently when the deadline hits between reads, and says
		// a bare 400 when it hits inside one.
		if r.got != "" && !strings.HasPrefix(r.got, "HTTP/1.1 400 Bad Request\r\n") {
			t.Errorf("the server answered a trickler %q, want a close or a bare 400", r.got)
		}
		longest, shortest = max(longest, r.lived), min(shortest, r.lived)
	}
	t.Logf("tricklers closed in time: %d of %d (after %v to %v); deliveries meanwhile: %d got 204, %d other, slowest %v",
		closed, tricklers, shortest.Round(time.Millisecond), longest.Round(time.Millisecond), ok, other, slowest.Round(time.Millisecond))
	if closed != tricklers {
		t.Errorf("%d tricklers were not closed within %v", tricklers-closed, closeBound)
	}
	if other > 0 || ok < 10 {
		t.Errorf("deliveries during the trickle: %d got 204, %d did not; want every one 204, and at least 10", ok, other)
	}
	if shortest < headerTimeout-100*time.Millisecond {
		t.Errorf("a trickler was closed after %v, before the header timeout: not by it", shortest)
	}
}

// TestInFlightLimit holds --max-in-flight requests half-way through their
// bodies on the real binary: the next delivery gets 503 with Retry-After at
// once, and once they finish deliveries get 204 again.
func TestInFlightLimit(t *testing.T) {
	db := filepath.Join(t.TempDir(), "inbox.db")
	srv := startServer(t, db, "--max-in-flight", "2")
	a := holdRequest(t, srv, job("job_a"), 1)
	b := holdRequest(t, srv, job("job_b"), 2)

	start := time.Now()
	resp, body := roundTrip(t, srv.url, rawRequest("POST", "/webhooks/sume", signedHeaders(job("job_c"), time.Now(), e2eSecret), job("job_c")))
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || body != "" {
		t.Fatalf("beyond the bound: %d, Retry-After %q, body %q; want 503 with Retry-After and no body", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("the 503 took %v: it waited instead of answering at once", took)
	}
	for _, h := range []*heldRequest{a, b} {
		if resp := h.finish(t); resp.StatusCode != http.StatusNoContent {
			t.Errorf("held request: %d, want 204", resp.StatusCode)
		}
	}
	if code := send(t, http.DefaultClient, srv.url, job("job_c"), e2eSecret); code != http.StatusNoContent {
		t.Errorf("after the held requests finished: %d, want 204", code)
	}
	rows := readRows(t, db)
	if len(rows) != 3 || rows["job_a"].Body != job("job_a") || rows["job_c"].Deliveries != 1 {
		t.Errorf("rows = %v, want job_a, job_b and job_c once", rows)
	}
}

// TestHeaderLimit checks that headers above the documented 16 KiB get 431,
// not a buffer the size of what a client sends, and that a request just
// under it is still read.
func TestHeaderLimit(t *testing.T) {
	srv := startServer(t, filepath.Join(t.TempDir(), "inbox.db"))
	for _, tt := range []struct {
		pad  int
		want int
	}{
		{64 << 10, http.StatusRequestHeaderFieldsTooLarge},
		{17 << 10, http.StatusRequestHeaderFieldsTooLarge}, // within net/http's own slack
		{14 << 10, http.StatusNoContent},
	} {
		id := fmt.Sprintf("job_pad_%d", tt.pad)
		h := append(signedHeaders(job(id), time.Now(), e2eSecret), "X-Pad: "+strings.Repeat("p", tt.pad))
		resp, _ := roundTrip(t, srv.url, rawRequest("POST", "/webhooks/sume", h, job(id)))
		if resp.StatusCode != tt.want {
			t.Errorf("%d bytes of headers: %d, want %d", tt.pad, resp.StatusCode, tt.want)
		}
	}
}

// TestServeRefusesBadLimits checks that serve names a bad limit in one
// line and stops before it creates the database.
func TestServeRefusesBadLimits(t *testing.T) {
	db := filepath.Join(t.TempDir(), "inbox.db")
	env := []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}
	for _, tt := range []struct {
		args []string
		flag string
	}{
		{[]string{"--max-in-flight", "0"}, "--max-in-flight"},
		{[]string{"--read-header-timeout", "0s"}, "--read-header-timeout"},
		{[]string{"--read-header-timeout", "5s", "--read-timeout", "2s"}, "--read-timeout"},
		{[]string{"--path", "/metrics"}, "--admin-addr"},
		{[]string{"--path", "/a {b}"}, "--path"},
	} {
		args := append([]string{"serve", "--db", db, "--addr", "127.0.0.1:0"}, tt.args...)
		_, errOut, code := runCLI(t, env, args...)
		if code != 1 || !strings.Contains(errOut, tt.flag) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q; want 1 and one line naming %s", tt.args, code, errOut, tt.flag)
		}
	}
	if _, err := os.Stat(db); err == nil {
		t.Error("serve created the database before refusing to start")
	}
}
