package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"inbox/sume"
)

// peakRSS returns the peak resident set of process pid so far (VmHWM), in
// bytes.
func peakRSS(t testing.TB, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// flood is clients that send large bodies as fast as the server takes
// them, with a signature that does not verify: what an attacker who wants
// the server's memory sends. Half declare their Content-Length, half send
// chunks, as different sender libraries do.
type flood struct {
	mu       sync.Mutex
	statuses map[int]int // 0: the request failed without an answer
	sent     atomic.Int64
}

// run sends bodies of size bytes from clients connections until ctx is
// done.
func (f *flood) run(ctx context.Context, url string, clients, size int) {
	f.statuses = map[int]int{}
	body := bytes.Repeat([]byte("x"), size)
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 15 * time.Second}
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				var r io.Reader = bytes.NewReader(body)
				if i%2 == 1 {
					r = struct{ io.Reader }{r} // no length known: chunked
				}
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, r)
				if err != nil {
					panic(err)
				}
				ts := strconv.FormatInt(time.Now().Unix(), 10)
				req.Header.Set(sume.HeaderTimestamp, ts)
				req.Header.Set(sume.HeaderSignature, "sume-v1="+strings.Repeat("0", 64))
				code := 0
				resp, err := client.Do(req)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					code = resp.StatusCode
				} else if ctx.Err() != nil {
					return
				}
				f.sent.Add(int64(size))
				f.mu.Lock()
				f.statuses[code]++
				f.mu.Unlock()
				if code == 0 || code == http.StatusServiceUnavailable {
					time.Sleep(10 * time.Millisecond) // as a client would; not a busy loop on a closed door
				}
			}
		}()
	}
	wg.Wait()
}

// check fails t unless the flood was partly read and refused (401: the
// budget lets large bodies in) and partly turned away (503: it bounds
// them), and answered nothing else.
func (f *flood) check(t testing.TB) {
	t.Helper()
	statuses := f.snapshot()
	if statuses[http.StatusUnauthorized] < 20 || statuses[http.StatusServiceUnavailable] == 0 {
		t.Errorf("flood answered %v: want bodies read and refused (401, at least 20) and bodies turned away (503)", statuses)
	}
	for code, n := range statuses {
		if code != 0 && code != http.StatusUnauthorized && code != http.StatusServiceUnavailable {
			t.Errorf("flood answered %d (%d times), want only 401 or 503", code, n)
		}
	}
}

func (f *flood) snapshot() map[int]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.statuses)
}

// defaultBodyMemory is serve's --max-body-memory default, in bytes.
const defaultBodyMemory = 64 << 20

// bodyMemoryGrowth is how far serve's peak RSS may grow past what it was
// before a flood of large bodies, with the default --max-body-memory: the
// bodies it holds; as much again in garbage the collector lets build up
// before it runs (GOGC=100: the heap grows to twice what it found live);
// and twice that for what a flood adds on a busy machine: the bodies that
// arrive while the collector marks count as live until the next cycle,
// and freed pages go back to the system a while after. Measured, it stays
// near three times; without the budget, 200 clients take it past 800 MiB.
const bodyMemoryGrowth = 4 * defaultBodyMemory

// TestBodyMemory floods the real binary with 200 clients sending bodies of
// almost the 4 MiB hard cap as fast as it takes them (800 MiB at once if
// it read them all), declared and chunked, while valid deliveries go on.
// The bodies held at once are bounded by --max-body-memory (64 MiB by
// default): the process's peak RSS stays under the bound asserted below,
// the flood is partly read (401) and partly answered 503 at once, and
// valid deliveries still get 204.
func TestBodyMemory(t *testing.T) {
	const (
		clients = 200
		size    = 4<<20 - 4<<10 // under the hard cap: every one is read unless the budget refuses it
		window  = 6 * time.Second
	)
	db := filepath.Join(t.TempDir(), "inbox.db")
	srv := startServer(t, db)
	for i := range 5 {
		if code := send(t, http.DefaultClient, srv.url, job(fmt.Sprintf("job_before_%d", i)), e2eSecret); code != http.StatusNoContent {
			t.Fatalf("delivery before the flood: %d", code)
		}
	}
	base := peakRSS(t, srv.cmd.Process.Pid)
	bound := base + bodyMemoryGrowth

	ctx, cancel := context.WithTimeout(context.Background(), window)
	defer cancel()
	var f flood
	flooded := make(chan struct{})
	go func() {
		defer close(flooded)
		f.run(ctx, srv.url, clients, size)
	}()
	var ok, other int
	client := &http.Client{Timeout: 5 * time.Second}
	time.Sleep(500 * time.Millisecond) // the flood is on
	for i := 0; ctx.Err() == nil; i++ {
		if code := send(t, client, srv.url, job(fmt.Sprintf("job_during_%d", i)), e2eSecret); code == http.StatusNoContent {
			ok++
		} else {
			other++
		}
		time.Sleep(20 * time.Millisecond)
	}
	<-flooded
	peak := peakRSS(t, srv.cmd.Process.Pid)
	statuses := f.snapshot()
	t.Logf("peak RSS %d MiB (%d MiB before the flood; bound %d MiB) while %d clients sent %d MiB in bodies of %d KiB: %v; valid deliveries meanwhile: %d got 204, %d other",
		peak>>20, base>>20, bound>>20, clients, f.sent.Load()>>20, size>>10, statuses, ok, other)
	if peak > bound {
		t.Errorf("peak RSS %d MiB, want at most %d MiB: the bodies held at once are not bounded", peak>>20, bound>>20)
	}
	f.check(t)
	if share := 100 * float64(ok) / float64(max(ok+other, 1)); share < 99 || ok < 5 {
		t.Errorf("valid deliveries during the flood: %d got 204, %d did not (%.1f%%); want at least 99%% (and 5)", ok, other, share)
	}
	if code := send(t, http.DefaultClient, srv.url, job("job_after"), e2eSecret); code != http.StatusNoContent {
		t.Errorf("after the flood: %d, want 204", code)
	}
}
