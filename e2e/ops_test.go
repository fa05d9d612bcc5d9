package e2e

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"inbox/metrics/metricstest"
)

// TestDispatchAdminAddr checks that inbox dispatch answers the probes and
// /metrics on --admin-addr, with its counters, and still stops cleanly.
func TestDispatchAdminAddr(t *testing.T) {
	t.Parallel()
	db := fillDB(t, 1)
	d := startDispatch(t, "--db", db, "--exec", "cat >/dev/null", "--admin-addr", "127.0.0.1:0")
	var admin string
	deadline := time.Now().Add(20 * time.Second)
	for admin == "" && time.Now().Before(deadline) {
		for _, line := range strings.Split(d.logs.String(), "\n") {
			var m struct{ Message, Addr, Serves string }
			if json.Unmarshal([]byte(line), &m) == nil && m.Message == "listening" && m.Serves == "admin" {
				admin = "http://" + m.Addr
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if admin == "" {
		t.Fatalf("dispatch did not listen:\n%s", d.logs)
	}
	for path, want := range map[string]string{"/healthz": "ok\n", "/readyz": "ok\ndestination default: dispatching\n"} {
		if code, body := get(t, admin+path); code != 200 || body != want {
			t.Errorf("%s: %d %q, want 200 %q", path, code, body, want)
		}
	}
	waitFor(t, "the row handed on", func() bool {
		return metricstest.Scrape(t, admin+"/metrics")[`inbox_dispatch_deliveries_total{destination="default",outcome="done"}`] == 1
	})
	d.kill(syscall.SIGTERM)
	if code := d.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit %d after SIGTERM, want 0\n%s", code, d.logs)
	}
}

// TestDispatchBesideServe runs dispatch in serve's environment, whose
// INBOX_ADMIN_ADDR names a port serve holds: dispatch must not take it up.
func TestDispatchBesideServe(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	t.Setenv("INBOX_ADMIN_ADDR", held.Addr().String())
	db := fillDB(t, 1)
	d := startDispatch(t, "--db", db, "--exec", "cat >/dev/null")
	waitFor(t, "dispatching", func() bool { return strings.Contains(d.logs.String(), `"dispatching"`) })
	select {
	case <-d.done:
		t.Fatalf("dispatch exited beside serve's admin port:\n%s", d.logs)
	case <-time.After(300 * time.Millisecond):
	}
	d.kill(syscall.SIGTERM)
}

// TestServeBusyPort checks that serve binds before it opens the store: a
// busy port is exit 1, and no database is left behind.
func TestServeBusyPort(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	db := filepath.Join(t.TempDir(), "inbox.db")
	for _, args := range [][]string{
		{"--addr", ln.Addr().String()},
		{"--addr", "127.0.0.1:0", "--admin-addr", ln.Addr().String()},
	} {
		_, errOut, code := runCLI(t, []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=s"}, append([]string{"serve", "--db", db}, args...)...)
		if code != 1 || !strings.Contains(errOut, "address already in use") {
			t.Errorf("%v: exit %d, stderr %q; want 1 and the address in use", args, code, errOut)
		}
		if _, err := os.Stat(db); !os.IsNotExist(err) {
			t.Errorf("%v: the database was created (%v)", args, err)
		}
	}
}
