package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDatabaseFileLost removes, renames or replaces the database file (or
// its -wal, or repoints the link --db names) under a running serve. Within
// a second every delivery gets 503 with Retry-After and /readyz fails; serve
// logs it once at error level, creates no database in its place and writes
// nothing into a replacement; and at the next start it does not quietly
// begin an empty inbox where one was lost.
func TestDatabaseFileLost(t *testing.T) {
	for _, tt := range []struct {
		name string
		// cause loses the file; it returns where the rows acknowledged
		// before it are once serve has stopped ("" when nowhere: the file
		// was removed).
		cause func(t *testing.T, db string) (rowsAt string)
		// restarts says whether serve starts again on db afterwards.
		restarts bool
	}{
		{"removed", func(t *testing.T, db string) string {
			must(t, os.Remove(db))
			return ""
		}, false},
		{"renamed", func(t *testing.T, db string) string {
			must(t, os.Rename(db, db+".moved"))
			return db + ".moved"
		}, false},
		{"replaced", func(t *testing.T, db string) string {
			other := emptyDatabase(t, filepath.Dir(db))
			must(t, os.Rename(db, db+".old"))
			must(t, os.Rename(other, db))
			return db + ".old"
		}, true},
		{"wal removed", func(t *testing.T, db string) string {
			must(t, os.Remove(db+"-wal"))
			return db
		}, true},
		{"link repointed", func(t *testing.T, db string) string {
			real, err := filepath.EvalSymlinks(db)
			must(t, err)
			other := emptyDatabase(t, filepath.Dir(real))
			must(t, os.Remove(db))
			must(t, os.Symlink(other, db))
			return real
		}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			db := filepath.Join(dir, "inbox.db")
			if tt.name == "link repointed" {
				must(t, os.Mkdir(filepath.Join(dir, "data"), 0o700))
				must(t, os.WriteFile(filepath.Join(dir, "data", "inbox.db"), nil, 0o600))
				must(t, os.Symlink(filepath.Join(dir, "data", "inbox.db"), db))
			}
			srv := startServer(t, db, "--busy-timeout", "500ms")
			var acked []string
			for _, id := range []string{"job_1", "job_2", "job_3"} {
				if got := send(t, http.DefaultClient, srv.url, job(id), e2eSecret); got != http.StatusNoContent {
					t.Fatalf("%s before: status %d", id, got)
				}
				acked = append(acked, id)
			}

			lostAt := time.Now()
			rowsAt := tt.cause(t, db)
			var replacement []byte
			if rowsAt != db && tt.restarts {
				replacement = readFile(t, db)
			}
			waitFor(t, "/readyz to fail", func() bool {
				code, _ := get(t, srv.url[:strings.Index(srv.url, "/webhooks")]+"/readyz")
				return code == 503
			})
			noticed := time.Since(lostAt)
			t.Logf("/readyz failed %v after the file was lost", noticed.Round(time.Millisecond))
			if noticed > time.Second {
				t.Errorf("/readyz failed %v after the file was lost, want within 1s", noticed)
			}

			client := &http.Client{Timeout: 5 * time.Second}
			for i := range 20 {
				status, retryAfter := post(context.Background(), client, srv.url, job("job_lost_"+string(rune('a'+i))))
				if status != http.StatusServiceUnavailable || retryAfter == "" {
					t.Fatalf("delivery %d after the loss: status %d, Retry-After %q; want 503 with Retry-After", i, status, retryAfter)
				}
			}
			if tt.name == "removed" || tt.name == "renamed" {
				if _, err := os.Stat(db); err == nil {
					t.Errorf("serve created a database at %s after it was %s", db, tt.name)
				}
			}
			if n := countLogs(t, srv.logs.String(), "error", "database file lost"); n != 1 {
				t.Errorf("logged the loss %d times at error level, want once:\n%s", n, srv.logs)
			}
			if strings.Contains(srv.logs.String(), e2eSecret) {
				t.Error("the log holds the secret")
			}
			srv.signal(syscall.SIGTERM)
			<-srv.done

			if replacement != nil && !bytes.Equal(readFile(t, db), replacement) {
				t.Errorf("serve wrote into the file that replaced the database")
			}
			// The next start.
			out, errOut, code := runServeBriefly(t, nil, db)
			switch {
			case tt.restarts && code != -1:
				t.Errorf("serve after the loss: exit %d, stdout %q, stderr %q; want it to start", code, out, errOut)
			case !tt.restarts && (code <= 0 || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "moved or removed while in use")):
				t.Errorf("serve after the loss: exit %d, stderr %q; want a one-line refusal to start an empty inbox", code, errOut)
			}
			if _, err := os.Stat(db); !tt.restarts && err == nil {
				t.Errorf("the start after the loss created %s", db)
			}
			switch tt.name {
			case "removed":
				// As the refusal says: without the -wal and -shm, serve
				// starts an empty inbox.
				must(t, os.Remove(db+"-wal"))
				must(t, os.Remove(db+"-shm"))
				if _, errOut, code := runServeBriefly(t, nil, db); code != -1 {
					t.Errorf("serve once the -wal and -shm are removed: exit %d: %s", code, errOut)
				}
				return
			case "renamed":
				// Put back, it is the inbox it was, with every row.
				must(t, os.Rename(rowsAt, db))
				rowsAt = db
				if _, errOut, code := runServeBriefly(t, nil, db); code != -1 {
					t.Errorf("serve once the file is back: exit %d: %s", code, errOut)
				}
			}
			checkStored(t, rowsAt, acked)
			if rows := readRows(t, rowsAt); len(rows) != len(acked) {
				t.Errorf("%s holds %d rows, want the %d acknowledged before the loss", rowsAt, len(rows), len(acked))
			}
		})
	}
}

// TestWritingCommandsRefuseLostFile renames the database away while a
// command that writes (purge, reprocess, dispatch) waits for the write
// lock: once it has the lock, the command finds its path no longer names
// the file it opened, says so, and writes nothing.
func TestWritingCommandsRefuseLostFile(t *testing.T) {
	t.Parallel()
	parked := `{"event":"job.exploded","job_id":"%s"}`
	for _, tt := range []struct {
		args []string
		body string // of the two deliveries stored first
		want string // the rows' status afterwards: as before
		// exits says whether the command ends by itself; dispatch keeps
		// retrying, and is stopped.
		exits bool
	}{
		{[]string{"purge", "--older-than", "7d", "--include-parked"}, parked, "parked", true},
		{[]string{"reprocess", "--reason", "unknown_event", "--event", "job.exploded"}, parked, "parked", true},
		{[]string{"dispatch", "--exec", "true"}, `{"event":"job.completed","job_id":"%s","status":"COMPLETED"}`, "new", false},
	} {
		t.Run(tt.args[0], func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "inbox.db")
			srv := startServer(t, db)
			for _, id := range []string{"job_1", "job_2"} {
				if got := send(t, http.DefaultClient, srv.url, fmt.Sprintf(tt.body, id), e2eSecret); got != http.StatusNoContent {
					t.Fatalf("%s: status %d", id, got)
				}
			}
			srv.signal(syscall.SIGTERM)
			<-srv.done

			holder, err := sql.Open("sqlite", db+"?_txlock=immediate")
			must(t, err)
			defer holder.Close()
			// Past purge's shortest retention.
			_, err = holder.Exec(`UPDATE events SET last_seen_at = last_seen_at - 8*86400000, received_at = received_at - 8*86400000`)
			must(t, err)
			tx, err := holder.Begin()
			must(t, err)
			cmd := exec.Command(binary(t), append([]string{tt.args[0], "--db", db, "--busy-timeout", "10s"}, tt.args[1:]...)...)
			var stdout, stderr syncBuffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			must(t, cmd.Start())
			waitFor(t, "the command to open the database", func() bool { return holdsOpen(cmd.Process.Pid, db) })
			time.Sleep(300 * time.Millisecond) // it waits for the lock now
			must(t, os.Rename(db, db+".moved"))
			tx.Rollback()
			if !tt.exits {
				waitFor(t, "the loss in the log", func() bool { return strings.Contains(stderr.String(), "database file lost") })
				time.Sleep(500 * time.Millisecond)
				cmd.Process.Signal(syscall.SIGTERM)
			}
			released := time.Now()
			err = cmd.Wait()
			t.Logf("%s ended %v after the lock was released", tt.args[0], time.Since(released).Round(time.Millisecond))
			holder.Close()
			if !strings.Contains(stderr.String(), "database file lost") {
				t.Errorf("%v: stderr %q; want it to name the lost file", tt.args, stderr.String())
			}
			if tt.exits && (err == nil || strings.Count(stderr.String(), "\n") != 1) {
				t.Errorf("%v: %v, stdout %q, stderr %q; want a one-line failure", tt.args, err, stdout.String(), stderr.String())
			}
			must(t, os.Rename(db+".moved", db))
			rows := readRows(t, db)
			for _, id := range []string{"job_1", "job_2"} {
				if r := rows[id]; r.Status != tt.want {
					t.Errorf("%s after %s: %+v, want it %s as before", id, tt.args[0], r, tt.want)
				}
			}
			conn, err := sql.Open("sqlite", db+"?_pragma=query_only(ON)")
			must(t, err)
			defer conn.Close()
			var attempts int
			must(t, conn.QueryRow(`SELECT COALESCE(sum(attempts), 0) + count(lease_owner) FROM events`).Scan(&attempts))
			if attempts != 0 {
				t.Errorf("after %s the rows hold %d attempts and leases, want none", tt.args[0], attempts)
			}
		})
	}
}

// runServeBriefly starts serve on db, with env and args added, and returns
// its output and exit code if it exits before it listens, or -1 once it
// has logged that it listens (and has been stopped): every check serve
// makes at start comes before its listeners serve. A serve that neither
// exits nor listens within 20 seconds counts as running too.
func runServeBriefly(t *testing.T, env []string, db string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"serve", "--addr", "127.0.0.1:0", "--db", db}, args...)...)
	cmd.Env = append(append(os.Environ(), "SUME_COM_WEBHOOK_SIGNING_SECRET="+e2eSecret), env...)
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	must(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case err := <-done:
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			return stdout.String(), stderr.String(), code
		case <-tick.C:
			if !strings.Contains(stderr.String(), `"message":"listening"`) {
				continue
			}
		case <-timeout:
		}
		cmd.Process.Signal(syscall.SIGTERM)
		<-done
		return stdout.String(), stderr.String(), -1
	}
}

// emptyDatabase makes another SQLite database in dir and returns its path.
func emptyDatabase(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "other.db")
	db, err := sql.Open("sqlite", path)
	must(t, err)
	defer db.Close()
	_, err = db.Exec(`CREATE TABLE other (a INTEGER)`)
	must(t, err)
	return path
}

// countLogs counts the JSON log lines at level whose message starts with msg.
func countLogs(t *testing.T, logs, level, msg string) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(logs, "\n") {
		var l struct{ Level, Message string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Level == level && strings.HasPrefix(l.Message, msg) {
			n++
		}
	}
	return n
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	return b
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// holdsOpen reports whether process pid has the file at path open.
func holdsOpen(pid int, path string) bool {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && target == path {
			return true
		}
	}
	return false
}
