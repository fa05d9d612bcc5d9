package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"inbox/replicaclient"
	"inbox/replicaclient/replicatest"
	"inbox/testport"
)

// sendAll sends a delivery for each id to srv and fails unless each is
// answered 204.
func sendAll(t *testing.T, srv *server, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if code := send(t, http.DefaultClient, srv.url, jobBody(id), e2eSecret); code != http.StatusNoContent {
			t.Fatalf("send %s: %d, want 204", id, code)
		}
	}
}

// TestReplicaDownAtStartSync: serve --replica-sync starts (a VM reboots)
// while its file:// replica's folder is blocked by a file: it listens,
// deliveries get 503 with Retry-After, their keys in inbox missed, and
// /readyz fails; once the folder is back it replicates by itself, and
// every delivery answered 204, before the reboot or after, is restored.
func TestReplicaDownAtStartSync(t *testing.T) {
	t.Parallel()
	dir, db := dataDir(t)
	repDir := filepath.Join(t.TempDir(), "replica")
	url := "file://" + repDir
	acked := []string{"before_0", "before_1"}
	srv := startServer(t, db, "--replica", url, "--replica-sync")
	sendAll(t, srv, acked...)
	srv.signal(syscall.SIGTERM)
	<-srv.done
	mend := breakReplica(t, repDir)
	srv = startServer(t, db, "--replica", url, "--replica-sync", "--admin-addr", "127.0.0.1:0")
	status, retryAfter := post(context.Background(), http.DefaultClient, srv.url, jobBody("refused"))
	if status != http.StatusServiceUnavailable || retryAfter == "" {
		t.Fatalf("delivery with the replica down since the start: %d Retry-After %q, want 503 with Retry-After", status, retryAfter)
	}
	if code, text := get(t, srv.admin+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(text, "replica: cannot be reached") {
		t.Errorf("/readyz with the replica down since the start: %d %q, want 503 naming the replica", code, text)
	}
	until(t, "inbox missed lists the refused key", func() string {
		if out, errOut, _ := adminRun(t, db, "missed"); !strings.Contains(out, "refused") {
			return out + errOut
		}
		return ""
	})
	mend()
	until(t, "deliveries answered 204 once the replica is there", func() string {
		if status, _ := post(context.Background(), http.DefaultClient, srv.url, jobBody("refused")); status != http.StatusNoContent {
			return fmt.Sprint("got ", status)
		}
		return ""
	})
	acked = append(acked, "refused", "after_0", "after_1")
	sendAll(t, srv, "after_0", "after_1")
	if code, text := get(t, srv.admin+"/readyz"); code != http.StatusOK || !strings.Contains(text, "replica: ok") {
		t.Errorf("/readyz with the replica there: %d %q, want 200", code, text)
	}
	logs := srv.logs.String()
	if n := strings.Count(logs, "replica cannot be reached (not since serve started)"); n != 1 || !strings.Contains(logs, "replica reached: replicating") {
		t.Errorf("the replica down at the start was logged %d times, want once, then its arrival:\n%s", n, logs)
	}
	srv.signal(syscall.SIGKILL)
	<-srv.done
	loseMachine(t, dir)
	restoreHas(t, url, acked)
}

// TestReplicaDownAtStartDefault: serve starts on an existing database
// while the path of its file:// replica is taken by a file: deliveries
// are answered 204 at once and inbox alert --replica-lag fires; once the
// file is removed the replica catches up by itself and holds every row.
func TestReplicaDownAtStartDefault(t *testing.T) {
	t.Parallel()
	dir, db := dataDir(t)
	srv := startServer(t, db)
	sendAll(t, srv, "first")
	srv.signal(syscall.SIGTERM)
	<-srv.done
	repDir := filepath.Join(t.TempDir(), "replica")
	if err := os.WriteFile(repDir, []byte("not a folder"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv = startServer(t, db, "--replica", "file://"+repDir, "--admin-addr", "127.0.0.1:0")
	during := []string{"during_0", "during_1", "during_2"}
	sendAll(t, srv, during...)
	until(t, "alert --replica-lag fires", func() string {
		out, errOut, code := adminRun(t, db, "alert", "--replica-lag", "2s")
		if code != 1 || !strings.Contains(out, "replica") {
			return fmt.Sprintf("exit %d %s %s", code, out, errOut)
		}
		return ""
	})
	if code, text := get(t, srv.admin+"/readyz"); code != http.StatusOK || !strings.Contains(text, "replica: cannot be reached") {
		t.Errorf("/readyz in the default mode with the replica down since the start: %d %q, want 200 with its line", code, text)
	}
	if err := os.Remove(repDir); err != nil {
		t.Fatal(err)
	}
	// The alert clears only on a sync that began after the file was
	// removed: it holds every row committed before.
	until(t, "alert --replica-lag clears once the replica is there", func() string {
		if out, errOut, code := adminRun(t, db, "alert", "--replica-lag", "2s"); code != 0 {
			return fmt.Sprintf("exit %d %s %s", code, out, errOut)
		}
		return ""
	})
	if n := strings.Count(srv.logs.String(), "replica cannot be reached"); n != 1 {
		t.Errorf("the replica down at the start was logged %d times, want once:\n%s", n, srv.logs)
	}
	srv.signal(syscall.SIGKILL)
	<-srv.done
	loseMachine(t, dir)
	restoreHas(t, "file://"+repDir, append([]string{"first"}, during...))
}

// TestReplicaDownAtStartNoDatabase: with no database file and a replica
// that cannot be read, serve refuses to start, --restore-if-missing or
// not, saying why (an empty inbox could overwrite the replica's history),
// and leaves no file behind.
func TestReplicaDownAtStartNoDatabase(t *testing.T) {
	t.Parallel()
	repDir := filepath.Join(t.TempDir(), "replica")
	if err := os.WriteFile(repDir, []byte("not a folder"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, extra := range [][]string{nil, {"--restore-if-missing"}} {
		db := filepath.Join(t.TempDir(), "inbox.db")
		args := append([]string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--replica", "file://" + repDir}, extra...)
		_, errOut, code := runCLI(t, []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}, args...)
		if code == 0 || !strings.Contains(errOut, "no database at "+db) || !strings.Contains(errOut, "overwrite") {
			t.Errorf("serve %v on a missing file over an unreadable replica: exit %d %q, want it refused, saying why", extra, code, errOut)
		}
		if _, err := os.Stat(db); err == nil {
			t.Errorf("serve %v: the refused start left a database file behind", extra)
		}
	}
}

// forward relays every TCP connection to from on to, until the test ends.
func forward(t *testing.T, from, to string) {
	t.Helper()
	ln, err := net.Listen("tcp", from)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				s, err := net.Dial("tcp", to)
				if err != nil {
					return
				}
				defer s.Close()
				go io.Copy(s, c)
				io.Copy(c, s)
			}()
		}
	}()
}

// TestReplicaDownAtStartNATS: serve --replica-sync starts while its
// JetStream server cannot be reached (a proxy in front of it, cut):
// Litestream would connect as it opens the database, which must not stop
// serve from starting. Deliveries get 503 until the server answers, then
// 204, and every one answered 204 is restored.
func TestReplicaDownAtStartNATS(t *testing.T) {
	t.Parallel()
	addr := replicatest.NATSAddr(t)
	_, bucket := replicatest.ObjectStore(t, addr)
	env := []string{
		replicaclient.EnvNATSCreds + "=",
		replicaclient.EnvNATSToken + "=",
		replicaclient.EnvNATSUser + "=",
		replicaclient.EnvNATSPassword + "=",
	}
	url := "nats://" + addr + "/" + bucket + "/vm1"
	port := testport.Addr(t) // nothing listens there until the server "comes up"
	viaPort := "nats://" + port + "/" + bucket + "/vm1"
	db := filepath.Join(t.TempDir(), "inbox.db")
	srv := startServer(t, db)
	sendAll(t, srv, "first")
	srv.signal(syscall.SIGTERM)
	<-srv.done
	srv = startInbox(t, append([]string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}, env...),
		"serve", "--addr", "127.0.0.1:0", "--db", db, "--replica", viaPort, "--replica-sync")
	if status, retryAfter := post(context.Background(), http.DefaultClient, srv.url, jobBody("refused")); status != http.StatusServiceUnavailable || retryAfter == "" {
		t.Fatalf("delivery with the replica's server down since the start: %d Retry-After %q, want 503 with Retry-After", status, retryAfter)
	}
	forward(t, port, addr)
	until(t, "deliveries answered 204 once the server answers", func() string {
		if status, _ := post(context.Background(), http.DefaultClient, srv.url, jobBody("refused")); status != http.StatusNoContent {
			return fmt.Sprint("got ", status)
		}
		return ""
	})
	sendAll(t, srv, "after")
	srv.signal(syscall.SIGKILL)
	<-srv.done
	to := filepath.Join(t.TempDir(), "restored.db")
	if out, errOut, code := runCLI(t, env, "restore", "--replica", url, "--to", to); code != 0 {
		t.Fatalf("restore: exit %d %s %s", code, out, errOut)
	}
	for _, id := range []string{"first", "refused", "after"} {
		if out, errOut, code := adminRun(t, to, "show", id); code != 0 {
			t.Errorf("%s answered 204 but not restored: %s %s", id, out, errOut)
		}
	}
}
