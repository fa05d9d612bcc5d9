package e2e

import (
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// job returns a storable delivery body for id.
func job(id string) string {
	return `{"event":"job.completed","job_id":"` + id + `","status":"COMPLETED","payload":{"artifacts":[]}}`
}

// waitLog waits until the server has logged msg.
func waitLog(t *testing.T, srv *server, msg string) {
	t.Helper()
	waitFor(t, "log "+msg, func() bool { return strings.Contains(srv.logs.String(), `"message":"`+msg+`"`) })
}

// waitRefused waits until the server no longer accepts connections.
func waitRefused(t *testing.T, srv *server) {
	t.Helper()
	u, _ := url.Parse(srv.url)
	waitFor(t, "connections refused", func() bool {
		c, err := net.DialTimeout("tcp", u.Host, time.Second)
		if err != nil {
			return errors.Is(err, syscall.ECONNREFUSED)
		}
		c.Close()
		return false
	})
}

// stopWithRequestInFlight sends SIGTERM while held is half-way through its
// body, and checks that the server stops accepting connections yet lets
// that request finish with 204, then exits 0 having closed the store.
func stopWithRequestInFlight(t *testing.T, srv *server, held *heldRequest) {
	t.Helper()
	srv.signal(syscall.SIGTERM)
	waitLog(t, srv, "shutting down")
	waitRefused(t, srv)
	select {
	case <-srv.done:
		t.Fatalf("exited with a request in flight: %v", srv.err)
	default:
	}
	if resp := held.finish(t); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("request in flight at SIGTERM: status %d, want 204", resp.StatusCode)
	}
	select {
	case <-srv.done:
	case <-time.After(10 * time.Second):
		t.Fatal("did not exit after the last request")
	}
	if srv.err != nil {
		t.Errorf("exit: %v, want status 0\n%s", srv.err, srv.logs)
	}
	waitLog(t, srv, "stopped")
}

// TestShutdownUnderLoad sends SIGTERM while deliveries stream in and one
// request is half-way through its body: the server stops accepting, lets
// that request finish and commit, closes the store and exits 0. Every
// acknowledged delivery is stored, and every stored one was acknowledged:
// no request was cut after its commit.
func TestShutdownUnderLoad(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inbox.db")
	// The held body waits out the load below: give it the whole read
	// timeout, not the body timeout a stalled body gets.
	srv := startServer(t, db, "--body-timeout", "8s")
	held := holdRequest(t, srv, job("job_held"), 1)

	l, stopLoad := startLoad(t, srv, "shutdown", 200)

	stopWithRequestInFlight(t, srv, held)
	stopLoad()
	if _, err := os.Stat(db + "-wal"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the WAL is still there (%v): the store was not closed", err)
	}

	acked, statuses, _ := l.snapshot()
	t.Logf("statuses: %v", statuses)
	for code := range statuses {
		if code != 204 && code != 0 {
			t.Errorf("load got %d %d times; want 204, or no connection once the server stopped", code, statuses[code])
		}
	}
	checkStored(t, db, append(l.acked, "job_held"))
	rows := readRows(t, db)
	if len(rows) != acked+1 {
		t.Errorf("%d rows stored, %d acknowledged: a request was cut after its commit", len(rows), acked+1)
	}
}

// TestSecondSignal checks that a second signal ends the process at once,
// even with a request in flight.
func TestSecondSignal(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			srv := startServer(t, filepath.Join(t.TempDir(), "inbox.db"))
			holdRequest(t, srv, job("job_held"), 1)
			srv.signal(sig)
			waitLog(t, srv, "shutting down")
			srv.signal(sig)
			select {
			case <-srv.done:
			case <-time.After(2 * time.Second):
				t.Fatal("still running 2s after the second signal")
			}
			var ee *exec.ExitError
			if !errors.As(srv.err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != sig {
				t.Errorf("exit: %v, want killed by %v", srv.err, sig)
			}
			if strings.Contains(srv.logs.String(), `"stopped"`) {
				t.Error("logged stopped: it waited for the request")
			}
		})
	}
}
