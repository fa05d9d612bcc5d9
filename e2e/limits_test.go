package e2e

import (
	"bufio"
	"context"
	"database/sql"
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
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"inbox/metrics/metricstest"
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

// TestInFlightLimit fills --max-in-flight on the real binary with
// deliveries the store holds (another process holds the write lock): the
// next delivery gets 503 with Retry-After at once, and once the lock is
// released the held ones get 204. Two requests half-way through their
// bodies meanwhile take no place in the bound: a body still arriving is
// not work in flight.
func TestInFlightLimit(t *testing.T) {
	db := filepath.Join(t.TempDir(), "inbox.db")
	// A body timeout as long as the read timeout: the held bodies below must
	// outlast the test, not be cut as stalled.
	srv := startServer(t, db, "--max-in-flight", "2", "--busy-timeout", "3s", "--body-timeout", "8s")
	a := holdRequest(t, srv, job("job_a"), 1)
	b := holdRequest(t, srv, job("job_b"), 2)

	holder, err := sql.Open("sqlite", db+"?_txlock=immediate&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	lock, err := holder.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback()
	codes := make(chan int, 2)
	for _, id := range []string{"job_c", "job_d"} {
		go func() { codes <- send(t, &http.Client{Timeout: 10 * time.Second}, srv.url, job(id), e2eSecret) }()
	}
	waitFor(t, "two deliveries held by the lock beside the two bodies", func() bool {
		return metricstest.Scrape(t, srv.admin+"/metrics")["inbox_requests_in_flight"] == 4
	})

	start := time.Now()
	resp, body := roundTrip(t, srv.url, rawRequest("POST", "/webhooks/sume", signedHeaders(job("job_e"), time.Now(), e2eSecret), job("job_e")))
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || body != "" {
		t.Fatalf("beyond the bound: %d, Retry-After %q, body %q; want 503 with Retry-After and no body", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("the 503 took %v: it waited instead of answering at once", took)
	}
	lock.Rollback()
	for range 2 {
		if code := <-codes; code != http.StatusNoContent {
			t.Errorf("delivery held by the lock: %d, want 204", code)
		}
	}
	for _, h := range []*heldRequest{a, b} {
		if resp := h.finish(t); resp.StatusCode != http.StatusNoContent {
			t.Errorf("held body: %d, want 204", resp.StatusCode)
		}
	}
	if code := send(t, http.DefaultClient, srv.url, job("job_e"), e2eSecret); code != http.StatusNoContent {
		t.Errorf("after the bound freed: %d, want 204", code)
	}
	rows := readRows(t, db)
	if len(rows) != 5 || rows["job_a"].Body != job("job_a") || rows["job_e"].Deliveries != 1 {
		t.Errorf("rows = %v, want job_a to job_e once each", rows)
	}
}

// trickle is one way a client can send its body slowly: the header lines
// after the request line, and what it sends of the body at each tick.
type trickle struct {
	name    string
	headers string
	tick    time.Duration
	chunk   string // "" sends nothing after the headers
	// big: it declares more than --max-body-memory keeps for small bodies,
	// so while large bodies fill the rest it may be turned away at once
	// (503), before it is read.
	big bool
}

// TestSlowBodies sends 1,000 unsigned clients at the real binary that send
// whole headers and then their bodies slowly, in four ways (a byte a
// second; nothing; a byte every 100 ms of a 3 MiB Content-Length; chunks
// of one byte a second), each reconnecting as soon as it is cut off, and
// beside them 32 clients that send bodies of almost 4 MiB (128 MiB at
// once) as fast as they are taken, while a steady stream of valid
// deliveries goes on. The slow
// bodies must not take the --max-in-flight places (512 by default, fewer
// than the tricklers) the valid ones need, nor the fast ones the
// --max-body-memory they need: at least 99% of those get 204, and the
// process's peak RSS stays bounded. And each slow body is cut off after
// --body-timeout (2 s by default), well before the read timeout (8 s),
// with 408.
func TestSlowBodies(t *testing.T) {
	const (
		tricklers   = 1000
		flooders    = 32
		bodyTimeout = 2 * time.Second // the default
		readTimeout = 8 * time.Second // the default
		window      = 8 * time.Second // of valid deliveries: past a read timeout
		// A trickler is cut bodyTimeout after its headers; slack for a small,
		// shared machine handling 1,000 connections, and still well short of
		// the read timeout, so a cut by the read timeout fails.
		cutBound = (bodyTimeout + readTimeout) / 2
	)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur < lim.Max {
		// Go raises the soft limit to the hard one at start already; this is
		// for a runtime that does not.
		lim.Cur = lim.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	if need := uint64(tricklers + 500); lim.Cur < need {
		t.Skipf("open files limited to %d (ulimit -Hn), need %d for %d connections", lim.Cur, need, tricklers)
	}
	db := filepath.Join(t.TempDir(), "inbox.db")
	srv := startServer(t, db)
	u, _ := url.Parse(srv.url)

	head := "POST /webhooks/sume HTTP/1.1\r\nHost: inbox.test\r\nContent-Type: application/json\r\n"
	kinds := []trickle{
		{"a byte a second", head + "Content-Length: 200\r\n\r\n", time.Second, "{", false},
		{"headers, then nothing", head + "Content-Length: 200\r\n\r\n", time.Second, "", false},
		{"3 MiB declared, a byte every 100 ms", head + "Content-Length: 3145728\r\n\r\n", 100 * time.Millisecond, " ", true},
		{"chunked, a byte a second", head + "Transfer-Encoding: chunked\r\n\r\n", time.Second, "1\r\n \r\n", false},
	}

	type cut struct {
		kind  int
		lived time.Duration
		got   string // the status line, or "" when closed without one
	}
	var (
		mu   sync.Mutex
		cuts []cut
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	dials := make(chan struct{}, 50) // dial at most 50 at once
	for i := range tricklers {
		k := kinds[i%len(kinds)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				dials <- struct{}{}
				c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
				<-dials
				if err != nil {
					time.Sleep(100 * time.Millisecond)
					continue
				}
				if _, err := io.WriteString(c, k.headers); err != nil {
					c.Close()
					continue
				}
				start := time.Now()
				closed := make(chan struct{})
				go func() {
					defer close(closed)
					tick := time.NewTicker(k.tick)
					defer tick.Stop()
					for {
						select {
						case <-ctx.Done():
							c.Close()
							return
						case <-tick.C:
							if k.chunk != "" {
								c.Write([]byte(k.chunk)) // fails once the server has closed
							}
						}
					}
				}()
				c.SetReadDeadline(start.Add(readTimeout + 2*time.Second))
				line, _ := bufio.NewReader(c).ReadString('\n') // the status line, or EOF or a reset at the cut
				lived := time.Since(start)
				c.Close()
				if ctx.Err() != nil {
					<-closed
					return // the test ended it, not the server
				}
				mu.Lock()
				cuts = append(cuts, cut{kind: i % len(kinds), lived: lived, got: strings.TrimSpace(line)})
				mu.Unlock()
				// The writer stops at its next tick, or at the end.
			}
		}()
	}

	// What the process holds with the tricklers in, before the fast bodies.
	waitFor(t, "the trickling bodies to arrive", func() bool {
		return metricstest.Scrape(t, srv.admin+"/metrics")["inbox_requests_in_flight"] >= tricklers*9/10
	})
	base := peakRSS(t, srv.cmd.Process.Pid)
	var f flood
	fctx, stopFlood := context.WithCancel(ctx)
	flooded := make(chan struct{})
	go func() {
		defer close(flooded)
		f.run(fctx, srv.url, flooders, 4<<20-4<<10)
	}()

	// The valid stream: two senders, one delivery after another.
	var ok, other atomic.Int64
	others := map[int]int{}
	var omu sync.Mutex
	var senders sync.WaitGroup
	deadline := time.Now().Add(window)
	for s := range 2 {
		senders.Add(1)
		go func() {
			defer senders.Done()
			client := &http.Client{Timeout: 5 * time.Second}
			for i := 0; time.Now().Before(deadline); i++ {
				code := send(t, client, srv.url, job(fmt.Sprintf("job_valid_%d_%d", s, i)), e2eSecret)
				if code == http.StatusNoContent {
					ok.Add(1)
					continue
				}
				other.Add(1)
				omu.Lock()
				others[code]++
				omu.Unlock()
			}
		}()
	}
	senders.Wait()
	stopFlood()
	<-flooded
	got := metricstest.Scrape(t, srv.admin+"/metrics")
	peak := peakRSS(t, srv.cmd.Process.Pid)
	cancel()
	wg.Wait()

	sent := ok.Load() + other.Load()
	share := 100 * float64(ok.Load()) / float64(max(sent, 1))
	t.Logf("valid deliveries beside %d trickling bodies and %d fast 4 MiB ones: %d of %d got 204 (%.2f%%), others %v", tricklers, flooders, ok.Load(), sent, share, others)
	// The floor is low: on two shared cores the fast bodies' senders, in
	// this process, slow the valid ones' down too.
	if share < 99 || ok.Load() < 30 {
		t.Errorf("%.2f%% of %d valid deliveries got 204; want at least 99%% (and 30)", share, sent)
	}
	t.Logf("fast bodies: %v, %d MiB sent; peak RSS %d MiB (%d MiB before them; bound %d MiB)", f.snapshot(), f.sent.Load()>>20, peak>>20, base>>20, (base+bodyMemoryGrowth)>>20)
	f.check(t)
	if peak > base+bodyMemoryGrowth {
		t.Errorf("peak RSS %d MiB, want at most %d MiB: the bodies held at once are not bounded", peak>>20, (base+bodyMemoryGrowth)>>20)
	}
	if n := got[`inbox_deliveries_total{outcome="rejected",reason="slow_body",source="sume"}`]; n < tricklers {
		t.Errorf("slow bodies counted: %v, want at least %d", n, tricklers)
	}

	perKind := make([]struct {
		n, answered, turned int
		short, longest      time.Duration
	}, len(kinds))
	for i := range perKind {
		perKind[i].short = time.Hour
	}
	for _, c := range cuts {
		k := &perKind[c.kind]
		if c.got == "HTTP/1.1 503 Service Unavailable" && kinds[c.kind].big {
			k.turned++ // before it was read: nothing to cut
			if c.lived >= bodyTimeout {
				t.Errorf("%s: turned away after %v, want at once, before the body timeout", kinds[c.kind].name, c.lived)
			}
			continue
		}
		k.n++
		k.short, k.longest = min(k.short, c.lived), max(k.longest, c.lived)
		switch {
		case c.got == "HTTP/1.1 408 Request Timeout":
			k.answered++
		case c.got != "":
			t.Errorf("%s: the server answered %q, want 408 or a close", kinds[c.kind].name, c.got)
		}
	}
	for i, k := range perKind {
		t.Logf("%s: cut %d times after %v to %v (%d answered 408); turned away at once %d times", kinds[i].name, k.n, k.short.Round(time.Millisecond), k.longest.Round(time.Millisecond), k.answered, k.turned)
		if k.n < tricklers/len(kinds) {
			t.Errorf("%s: cut %d times, want each of its %d clients cut at least once", kinds[i].name, k.n, tricklers/len(kinds))
		}
		if k.longest > cutBound {
			t.Errorf("%s: a body was held %v, want cut within %v (the body timeout, not the %v read timeout)", kinds[i].name, k.longest, cutBound, readTimeout)
		}
		if k.short < bodyTimeout-100*time.Millisecond {
			t.Errorf("%s: a body was cut after %v, before the body timeout: not by it", kinds[i].name, k.short)
		}
	}
}

// TestHeaderLimit checks that headers above the documented 16 KiB get 431,
// not a buffer the size of what a client sends, and that a request just
// under it is still read.
func TestHeaderLimit(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inbox.db")
	env := []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}
	for _, tt := range []struct {
		args []string
		flag string
	}{
		{[]string{"--max-in-flight", "0"}, "--max-in-flight"},
		{[]string{"--read-header-timeout", "0s"}, "--read-header-timeout"},
		{[]string{"--read-header-timeout", "5s", "--read-timeout", "2s"}, "--read-timeout"},
		{[]string{"--body-timeout", "0s"}, "--body-timeout"},
		{[]string{"--body-timeout", "9s"}, "--body-timeout"},
		{[]string{"--read-header-timeout", "1s", "--read-timeout", "3s", "--body-timeout", "5s"}, "--body-timeout"},
		{[]string{"--max-body-memory", "0"}, "--max-body-memory"},
		{[]string{"--max-body-memory", "lots"}, "--max-body-memory"},
		{[]string{"--max-body-memory", "4MiB"}, "--max-body-memory"}, // under twice --max-request
		{[]string{"--max-body-memory", "8MiB", "--max-request", "5MiB"}, "--max-body-memory"},
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
