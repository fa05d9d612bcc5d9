package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// largeJob is a storable delivery of about size bytes, its job id unique.
func largeJob(name string, size int) string {
	return fmt.Sprintf(`{"event":"job.completed","job_id":"%s","status":"COMPLETED","pad":"%s"}`, name, strings.Repeat("x", size))
}

// mountTmpfs mounts a tmpfs of size on a new directory, unmounted when the
// test ends, and returns the directory.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs here (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// fillLeaving fills the file system dir is on with a file of its own,
// then frees room bytes of it, and returns the file.
func fillLeaving(t *testing.T, dir string, room int64) string {
	t.Helper()
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	must(t, err)
	defer f.Close()
	for _, chunk := range [][]byte{make([]byte, 64<<10), make([]byte, 4<<10)} {
		for {
			if _, err := f.Write(chunk); err != nil {
				break // ENOSPC
			}
		}
	}
	fi, err := f.Stat()
	must(t, err)
	must(t, f.Truncate(fi.Size()-room))
	return filler
}

// serveOnTmpfs serves a database on a tmpfs of its own, with 5 deliveries
// of 60 KiB stored, and returns the tmpfs, the server and what sends the
// next such delivery and returns its status.
func serveOnTmpfs(t *testing.T) (string, *server, func() int) {
	t.Helper()
	dir := mountTmpfs(t, "32m")
	db := filepath.Join(dir, "inbox.db")
	srv := startServer(t, db, "--admin-addr", "127.0.0.1:0", "--busy-timeout", "1s")
	client := &http.Client{Timeout: 10 * time.Second}
	seq := 0
	deliver := func() int {
		seq++
		status, _ := post(context.Background(), client, srv.url, largeJob(fmt.Sprintf("full_%d", seq), 60<<10))
		return status
	}
	for range 5 {
		if got := deliver(); got != http.StatusNoContent {
			t.Fatalf("before the disk filled: delivery %d\n%s", got, srv.logs)
		}
	}
	return dir, srv, deliver
}

// TestReadyzDiskFullForDeliveries fills the file system the database is
// on until 60 KiB deliveries get 503 while the probe's own small row would
// still fit: /readyz fails at once, and still after another refused
// delivery; once the disk is freed it passes again with no delivery sent
// (a replica marked not ready gets none), and deliveries are stored again.
func TestReadyzDiskFullForDeliveries(t *testing.T) {
	dir, srv, deliver := serveOnTmpfs(t)
	if got := readyz(srv.admin); got != http.StatusOK {
		t.Fatalf("before the disk filled: /readyz %d", got)
	}

	filler := fillLeaving(t, dir, 32<<10)
	// The WAL's room from before takes deliveries for a while.
	refused := false
	for range 600 {
		if got := deliver(); got == http.StatusServiceUnavailable {
			refused = true
			break
		}
	}
	if !refused {
		t.Fatal("60 KiB deliveries still stored on a full disk: the test proved nothing")
	}
	if got := readyz(srv.admin); got != http.StatusServiceUnavailable {
		t.Errorf("/readyz right after a 60 KiB delivery got 503 on a full disk: %d, want 503", got)
	}
	if got := deliver(); got != http.StatusServiceUnavailable {
		t.Fatalf("the next delivery: %d, want 503", got)
	}
	for range 3 {
		if got := readyz(srv.admin); got != http.StatusServiceUnavailable {
			t.Errorf("/readyz after another refused delivery: %d, want 503", got)
		}
	}

	must(t, os.Remove(filler))
	waitFor(t, "/readyz to pass again with no delivery", func() bool { return readyz(srv.admin) == http.StatusOK })
	if got := deliver(); got != http.StatusNoContent {
		t.Errorf("a delivery once /readyz passed again: %d, want 204", got)
	}
	if got := readyz(srv.admin); got != http.StatusOK {
		t.Errorf("/readyz after a stored delivery: %d, want 200", got)
	}
}

// TestReadyzPostgresRefusesEvents takes from serve, on PostgreSQL, what
// every delivery needs of the events table while the probe table stays
// writable: a LOCK TABLE held on another connection, then a revoked INSERT.
// Each time deliveries get 503 and /readyz fails, with deliveries and while
// idle; once the cause is gone it passes again with no delivery sent, and
// deliveries are stored again.
func TestReadyzPostgresRefusesEvents(t *testing.T) {
	t.Parallel()
	base := pgSchema(t)
	schema := pgSearchPath(base)
	role, dsn := pgRole(t, base)
	srv := startInbox(t, []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}, "serve", "--addr", "127.0.0.1:0",
		"--admin-addr", "127.0.0.1:0", "--db", dsn, "--busy-timeout", "1s")
	client := &http.Client{Timeout: 10 * time.Second}
	seq := 0
	deliver := func() int {
		seq++
		status, _ := post(context.Background(), client, srv.url, fmt.Sprintf(`{"event":"job.completed","job_id":"pg_%d","status":"COMPLETED"}`, seq))
		return status
	}
	if got := deliver(); got != http.StatusNoContent {
		t.Fatalf("before: delivery %d\n%s", got, srv.logs)
	}
	if got := readyz(srv.admin); got != http.StatusOK {
		t.Fatalf("before: /readyz %d", got)
	}

	var unlock func()
	for _, c := range []struct {
		name          string
		cause, remedy func()
	}{{
		name: "LOCK TABLE events",
		cause: func() {
			conn := pgConnect(t, base)
			ctx := context.Background()
			if _, err := conn.Exec(ctx, `BEGIN; LOCK TABLE `+schema+`.events IN ACCESS EXCLUSIVE MODE`); err != nil {
				t.Fatal(err)
			}
			unlock = func() {
				if _, err := conn.Exec(ctx, `ROLLBACK`); err != nil {
					t.Fatal(err)
				}
			}
		},
		remedy: func() { unlock() },
	}, {
		name:   "REVOKE INSERT ON events",
		cause:  func() { pgExec(t, base, `REVOKE INSERT ON `+schema+`.events FROM `+role) },
		remedy: func() { pgExec(t, base, `GRANT INSERT ON `+schema+`.events TO `+role) },
	}} {
		c.cause()
		refused := 0
		for range 3 {
			if deliver() == http.StatusServiceUnavailable {
				refused++
			}
		}
		if refused != 3 {
			t.Fatalf("%s: %d of 3 deliveries got 503: the test proved nothing\n%s", c.name, refused, srv.logs)
		}
		if got := readyz(srv.admin); got != http.StatusServiceUnavailable {
			t.Errorf("%s: /readyz after 3 refused deliveries: %d, want 503", c.name, got)
		}
		if got := readyz(srv.admin); got != http.StatusServiceUnavailable {
			t.Errorf("%s: /readyz again, idle: %d, want 503", c.name, got)
		}
		c.remedy()
		waitFor(t, c.name+": /readyz to pass again with no delivery", func() bool { return readyz(srv.admin) == http.StatusOK })
		if got := deliver(); got != http.StatusNoContent {
			t.Errorf("%s: a delivery once /readyz passed again: %d, want 204", c.name, got)
		}
	}
}

// TestReadyzDispatchFollowsItsWrites revokes UPDATE on events from the
// role `inbox dispatch` runs as on PostgreSQL: it can no longer claim the
// stored row, and its /readyz fails, with the row waiting; once UPDATE is
// granted again it passes with nothing else done, and the row is handed on.
func TestReadyzDispatchFollowsItsWrites(t *testing.T) {
	t.Parallel()
	base := pgSchema(t)
	schema := pgSearchPath(base)
	role, dsn := pgRole(t, base)
	srv := startInbox(t, []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}, "serve", "--addr", "127.0.0.1:0", "--db", dsn)
	if status, _ := post(context.Background(), http.DefaultClient, srv.url, `{"event":"job.completed","job_id":"disp_1","status":"COMPLETED"}`); status != http.StatusNoContent {
		t.Fatalf("delivery: %d\n%s", status, srv.logs)
	}
	pgExec(t, base, `REVOKE UPDATE ON `+schema+`.events FROM `+role)
	handled := filepath.Join(t.TempDir(), "handled")
	d := startInbox(t, nil, "dispatch", "--db", dsn, "--admin-addr", "127.0.0.1:0", "--busy-timeout", "1s",
		"--exec", "cat >> "+handled)
	waitFor(t, "the dispatcher to fail its claim", func() bool { return strings.Contains(d.logs.String(), "cannot write to the inbox") })
	for range 2 {
		if got := readyz(d.admin); got != http.StatusServiceUnavailable {
			t.Errorf("dispatch's /readyz while it cannot claim: %d, want 503", got)
		}
	}
	pgExec(t, base, `GRANT UPDATE ON `+schema+`.events TO `+role)
	waitFor(t, "dispatch's /readyz to pass again", func() bool { return readyz(d.admin) == http.StatusOK })
	waitFor(t, "the row handed on", func() bool {
		b, _ := os.ReadFile(handled)
		return strings.Contains(string(b), "disp_1")
	})
}
