package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// readyz returns the status of GET /readyz on admin, 0 when it does not
// answer within 5 s.
func readyz(admin string) int {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(admin + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestPostgresUnreachable runs `inbox serve` on PostgreSQL through a TCP
// proxy the test cuts (every connection reset, new ones refused) and then
// stalls (connections held, nothing relayed): meanwhile every delivery is
// answered 503 with Retry-After within --busy-timeout and half a second
// (never 2xx, never 500) and /readyz fails; once the proxy relays again,
// deliveries are answered 204 and /readyz is ready with nothing done to
// serve.
func TestPostgresUnreachable(t *testing.T) {
	const busy = time.Second
	const bound = busy + 500*time.Millisecond // RECEIVER-CONTRACT row 19
	proxy, dsn := startPGProxy(t, pgSchema(t))
	srv := startInbox(t, []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}, "serve", "--addr", "127.0.0.1:0",
		"--admin-addr", "127.0.0.1:0", "--db", dsn, "--busy-timeout", busy.String())
	client := &http.Client{Timeout: 10 * time.Second}
	seq := 0
	deliver := func() (int, string, time.Duration) {
		seq++
		body := fmt.Sprintf(`{"event":"job.completed","job_id":"out_%d","status":"COMPLETED"}`, seq)
		start := time.Now()
		status, retryAfter := post(context.Background(), client, srv.url, body)
		return status, retryAfter, time.Since(start)
	}
	if status, _, _ := deliver(); status != http.StatusNoContent {
		t.Fatalf("before the outage: status %d\n%s", status, srv.logs)
	}
	if got := readyz(srv.admin); got != http.StatusOK {
		t.Fatalf("before the outage: /readyz %d", got)
	}

	for _, way := range []struct {
		name  string
		cause func()
	}{{"cut", proxy.cut}, {"stall", proxy.stall}} {
		way.cause()
		// Several senders at once for a while, each waiting for its answer.
		var mu sync.Mutex
		statuses := map[int]int{}
		var slowest time.Duration
		noRetry := 0
		var wg sync.WaitGroup
		stopAt := time.Now().Add(2500 * time.Millisecond)
		for range 4 {
			wg.Go(func() {
				for time.Now().Before(stopAt) {
					mu.Lock()
					seq++
					body := fmt.Sprintf(`{"event":"job.completed","job_id":"out_%s_%d","status":"COMPLETED"}`, way.name, seq)
					mu.Unlock()
					start := time.Now()
					status, retryAfter := post(context.Background(), client, srv.url, body)
					took := time.Since(start)
					mu.Lock()
					statuses[status]++
					slowest = max(slowest, took)
					if status == http.StatusServiceUnavailable && retryAfter == "" {
						noRetry++
					}
					mu.Unlock()
				}
			})
		}
		ready := readyz(srv.admin)
		wg.Wait()
		t.Logf("%s: statuses %v, slowest answer %s (bound %s), /readyz %d", way.name, statuses, slowest.Round(time.Millisecond), bound, ready)
		if statuses[http.StatusServiceUnavailable] == 0 || len(statuses) != 1 {
			t.Errorf("%s: answered %v, want only 503", way.name, statuses)
		}
		if noRetry > 0 {
			t.Errorf("%s: %d 503s without Retry-After", way.name, noRetry)
		}
		if slowest > bound {
			t.Errorf("%s: slowest answer %s, want within %s", way.name, slowest, bound)
		}
		if ready == http.StatusOK {
			t.Errorf("%s: /readyz answered 200 while the database was unreachable", way.name)
		}

		restored := time.Now()
		proxy.restore()
		var status int
		for status != http.StatusNoContent {
			if time.Since(restored) > 15*time.Second {
				t.Fatalf("%s: deliveries still get %d 15s after the database came back\n%s", way.name, status, srv.logs)
			}
			time.Sleep(50 * time.Millisecond)
			status, _, _ = deliver()
		}
		delivering := time.Since(restored)
		for readyz(srv.admin) != http.StatusOK {
			if time.Since(restored) > 15*time.Second {
				t.Fatalf("%s: /readyz still fails 15s after the database came back", way.name)
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Logf("%s: 204 again %s after the database came back, /readyz ready after %s", way.name,
			delivering.Round(time.Millisecond), time.Since(restored).Round(time.Millisecond))
	}
	select {
	case <-srv.done:
		t.Fatalf("serve exited: %v\n%s", srv.err, srv.logs)
	default:
	}
}
