package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// replicaLoad sends signed deliveries from conns connections until ctx is
// done; one in five is an unknown event, parked. It returns each id
// answered 204 with the status its row must have; count, if not nil,
// counts them as they come.
func replicaLoad(ctx context.Context, url string, conns int, prefix string, count *atomic.Int64) map[string]string {
	var mu sync.Mutex
	acked := map[string]string{}
	var wg sync.WaitGroup
	for c := range conns {
		wg.Go(func() {
			client := &http.Client{Timeout: 10 * time.Second}
			defer client.CloseIdleConnections()
			for i := 0; ctx.Err() == nil; i++ {
				id := fmt.Sprintf("%s_%d_%d", prefix, c, i)
				event, want := "job.completed", "new"
				if i%5 == 4 {
					event, want = "job.exploded", "parked"
				}
				body := fmt.Sprintf(`{"event":%q,"job_id":%q,"status":"COMPLETED","payload":{"pad":%q}}`, event, id, strings.Repeat("x", 512))
				status, _ := post(ctx, client, url, body)
				if ctx.Err() != nil {
					return
				}
				if status == http.StatusNoContent {
					mu.Lock()
					acked[id] = want
					mu.Unlock()
					if count != nil {
						count.Add(1)
					}
				} else {
					time.Sleep(5 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	return acked
}

// restoreAndCheck restores the replica at url into a new file with the
// real binary and checks that every acked id is there, with its status.
// env adds the replica's credentials to the binary's environment.
func restoreAndCheck(t *testing.T, env []string, url string, acked map[string]string) string {
	t.Helper()
	to := restoreTo(t, env, url)
	lost := notRestored(t, to, acked)
	parked := 0
	for _, want := range acked {
		if want == "parked" {
			parked++
		}
	}
	t.Logf("answered 204: %d (%d parked); not restored: %d", len(acked), parked, len(lost))
	if len(acked) < 100 || parked == 0 {
		t.Errorf("only %d deliveries answered 204 (%d parked): not enough to prove anything", len(acked), parked)
	}
	return to
}

// restoreHas restores the replica at url into a new file with the real
// binary and checks that every id is there, whatever its status.
func restoreHas(t *testing.T, url string, ids []string) {
	t.Helper()
	acked := map[string]string{}
	for _, id := range ids {
		acked[id] = ""
	}
	notRestored(t, restoreTo(t, nil, url), acked)
}

// restoreTo restores the replica at url with the real binary into a new
// file, and returns its path. env adds the replica's credentials to the
// binary's environment.
func restoreTo(t *testing.T, env []string, url string) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), "new-vm", "inbox.db")
	if out, errOut, code := runCLI(t, env, "restore", "--replica", url, "--to", to); code != 0 {
		t.Fatalf("inbox restore: exit %d %s %s", code, out, errOut)
	}
	return to
}

// notRestored fails the test for each id of acked the restored database
// at to lacks, or holds with another status than acked's (any, for "").
func notRestored(t *testing.T, to string, acked map[string]string) []string {
	t.Helper()
	conn, err := sql.Open("sqlite", to+"?_pragma=query_only(ON)")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var lost []string
	for id, want := range acked {
		var status string
		if err := conn.QueryRow("SELECT status FROM events WHERE id = ?", id).Scan(&status); err != nil || (want != "" && status != want) {
			lost = append(lost, fmt.Sprintf("%s (%q, %v)", id, status, err))
		}
	}
	if len(lost) > 0 {
		t.Errorf("answered 204 but not in the restored database: %v", lost[:min(len(lost), 10)])
	}
	return lost
}

// dataDir makes the database folder a test loses with its machine, and
// returns it with the database's path in it.
func dataDir(t *testing.T) (dir, db string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir, filepath.Join(dir, "inbox.db")
}

// loseMachine removes every file of the database folder: the disk is gone.
func loseMachine(t *testing.T, dir string) {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
}

// restoreRefused checks that inbox restore of the replica at url onto the
// existing file to is refused, and leaves the file as it was.
func restoreRefused(t *testing.T, env []string, url, to string) {
	t.Helper()
	before, err := os.ReadFile(to)
	if err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runCLI(t, env, "restore", "--replica", url, "--to", to)
	if code == 0 || !strings.Contains(errOut, "exists") {
		t.Errorf("restore onto an existing file: exit %d %q, want it refused", code, errOut)
	}
	if after, _ := os.ReadFile(to); string(after) != string(before) {
		t.Error("restore onto an existing file changed it")
	}
}

// syncKillRestore runs serve with --replica url --replica-sync, env adding
// the replica's credentials, under load from senders, kills it with
// SIGKILL and deletes its database folder; inbox restore must bring back
// every delivery answered 204, parked ones included, and refuse to write
// over the file it restored. It returns what serve logged.
func syncKillRestore(t *testing.T, env []string, url string, senders int) string {
	t.Helper()
	dir, db := dataDir(t)
	srv := startInbox(t, append([]string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}, env...),
		"serve", "--addr", "127.0.0.1:0", "--db", db, "--replica", url, "--replica-sync")
	ctx, cancel := context.WithCancel(context.Background())
	var acked map[string]string
	var count atomic.Int64
	done := make(chan struct{})
	go func() { acked = replicaLoad(ctx, srv.url, senders, "sync", &count); close(done) }()
	// At least 3 s of load, and on a slow store or a busy machine until
	// enough deliveries were answered to prove something.
	time.Sleep(3 * time.Second)
	for deadline := time.Now().Add(60 * time.Second); count.Load() < 300 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	srv.signal(syscall.SIGKILL)
	<-srv.done
	cancel()
	<-done
	loseMachine(t, dir)
	to := restoreAndCheck(t, env, url, acked)
	restoreRefused(t, env, url, to)
	return srv.logs.String()
}

// TestReplicaSyncKill: under --replica-sync and load from 32 senders,
// serve is killed with SIGKILL and its database folder deleted; inbox
// restore brings back every delivery answered 204, parked ones included.
func TestReplicaSyncKill(t *testing.T) {
	t.Parallel()
	syncKillRestore(t, nil, "file://"+filepath.Join(t.TempDir(), "replica"), 32)
}

// TestReplicaDefaultTerm: in the default mode, serve stopped with SIGTERM
// sends its last commits before it exits; inbox restore brings back every
// delivery answered 204, and refuses to write over an existing file.
func TestReplicaDefaultTerm(t *testing.T) {
	t.Parallel()
	dir, db := dataDir(t)
	url := "file://" + filepath.Join(t.TempDir(), "replica")
	srv := startServer(t, db, "--replica", url)
	ctx, cancel := context.WithCancel(context.Background())
	var acked map[string]string
	done := make(chan struct{})
	go func() { acked = replicaLoad(ctx, srv.url, 32, "term", nil); close(done) }()
	time.Sleep(3 * time.Second)
	srv.signal(syscall.SIGTERM)
	<-srv.done
	cancel()
	<-done
	if srv.err != nil {
		t.Fatalf("serve after SIGTERM: %v\n%s", srv.err, srv.logs)
	}
	loseMachine(t, dir)
	to := restoreAndCheck(t, nil, url, acked)
	restoreRefused(t, nil, url, to)
}

// TestReplicaRestoreIfMissing: serve --restore-if-missing on a new
// machine (no database file) restores from the replica before it starts.
func TestReplicaRestoreIfMissing(t *testing.T) {
	t.Parallel()
	url := "file://" + filepath.Join(t.TempDir(), "replica")
	first := filepath.Join(t.TempDir(), "inbox.db")
	srv := startServer(t, first, "--replica", url, "--restore-if-missing")
	if code := send(t, http.DefaultClient, srv.url, `{"event":"job.completed","job_id":"job_kept","status":"COMPLETED"}`, e2eSecret); code != http.StatusNoContent {
		t.Fatalf("send: %d", code)
	}
	srv.signal(syscall.SIGTERM)
	<-srv.done
	if !strings.Contains(srv.logs.String(), "none on the replica: starting an empty inbox") {
		t.Errorf("first start on an empty replica does not say so:\n%s", srv.logs)
	}
	second := filepath.Join(t.TempDir(), "inbox.db")
	// Without --restore-if-missing an empty file would become the
	// replica's latest state: refused.
	_, errOut, code := runCLI(t, []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}, "serve", "--addr", "127.0.0.1:0", "--db", second, "--replica", url)
	if code == 0 || !strings.Contains(errOut, "--restore-if-missing") {
		t.Errorf("serve on a missing file over a replica that holds one: exit %d %q, want it refused", code, errOut)
	}
	if _, err := os.Stat(second); err == nil {
		t.Error("the refused start left a database file behind")
	}
	srv = startServer(t, second, "--replica", url, "--restore-if-missing")
	srv.signal(syscall.SIGTERM)
	<-srv.done
	if !strings.Contains(srv.logs.String(), "restored it from the replica") {
		t.Errorf("start on a new machine does not say it restored:\n%s", srv.logs)
	}
	out, errOut, code := adminRun(t, second, "show", "job_kept")
	if code != 0 {
		t.Errorf("show job_kept on the restored database: exit %d %s %s", code, out, errOut)
	}
}

// breakReplica replaces the replica's folder with a file, which no one,
// root included, can write into; the returned func puts it back.
func breakReplica(t *testing.T, dir string) (mend func()) {
	t.Helper()
	if err := os.Rename(dir, dir+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, []byte("not a folder"), 0o600); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := os.Remove(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(dir+".away", dir); err != nil {
			t.Fatal(err)
		}
	}
}

// until retries f every 100 ms for up to 20 s until it returns "", and
// fails the test with what and f's last answer otherwise.
func until(t *testing.T, what string, f func() string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		msg := f()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s", what, msg)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestReplicaUnreachableSync: under --replica-sync a replica that cannot
// be written gets deliveries 503 with Retry-After, their keys in inbox
// missed, and /readyz fails; once it is back serve recovers by itself,
// and nothing answered 204 is lost.
func TestReplicaUnreachableSync(t *testing.T) {
	t.Parallel()
	dir, db := dataDir(t)
	repDir := filepath.Join(t.TempDir(), "replica")
	url := "file://" + repDir
	srv := startServer(t, db, "--replica", url, "--replica-sync", "--admin-addr", "127.0.0.1:0")
	acked := map[string]string{}
	body := func(id string) string {
		return fmt.Sprintf(`{"event":"job.completed","job_id":%q,"status":"COMPLETED"}`, id)
	}
	for i := range 5 {
		id := fmt.Sprintf("before_%d", i)
		if code := send(t, http.DefaultClient, srv.url, body(id), e2eSecret); code != http.StatusNoContent {
			t.Fatalf("send %s: %d", id, code)
		}
		acked[id] = "new"
	}
	mend := breakReplica(t, repDir)
	status, retryAfter := post(context.Background(), http.DefaultClient, srv.url, body("refused"))
	if status != http.StatusServiceUnavailable || retryAfter == "" {
		t.Fatalf("delivery with the replica gone: %d Retry-After %q, want 503 with Retry-After", status, retryAfter)
	}
	if code, text := get(t, srv.admin+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(text, "replica: cannot be reached") {
		t.Errorf("/readyz with the replica gone: %d %q, want 503 naming the replica", code, text)
	}
	until(t, "inbox missed lists the refused key", func() string {
		out, errOut, _ := adminRun(t, db, "missed")
		if !strings.Contains(out, "refused") {
			return out + errOut
		}
		return ""
	})
	mend()
	until(t, "deliveries answered 204 once the replica is back", func() string {
		if status, _ := post(context.Background(), http.DefaultClient, srv.url, body("refused")); status != http.StatusNoContent {
			return fmt.Sprint("got ", status)
		}
		return ""
	})
	acked["refused"] = "new"
	until(t, "inbox missed forgets the key once it was delivered again", func() string {
		if out, errOut, _ := adminRun(t, db, "missed"); strings.Contains(out, "refused") {
			return out + errOut
		}
		return ""
	})
	if code, text := get(t, srv.admin+"/readyz"); code != http.StatusOK || !strings.Contains(text, "replica: ok") {
		t.Errorf("/readyz with the replica back: %d %q, want 200", code, text)
	}
	for i := range 5 {
		id := fmt.Sprintf("after_%d", i)
		if code := send(t, http.DefaultClient, srv.url, body(id), e2eSecret); code != http.StatusNoContent {
			t.Fatalf("send %s: %d", id, code)
		}
		acked[id] = "new"
	}
	if n := strings.Count(srv.logs.String(), "replica cannot be reached"); n != 1 {
		t.Errorf("the outage was logged %d times, want once:\n%s", n, srv.logs)
	}
	srv.signal(syscall.SIGKILL)
	<-srv.done
	loseMachine(t, dir)
	restoreHas(t, url, slices.Collect(maps.Keys(acked)))
}

// TestReplicaUnreachableDefault: in the default mode deliveries go on
// while the replica cannot be written, the error is logged once, and
// inbox alert --replica-lag fires; once the replica is back it clears.
func TestReplicaUnreachableDefault(t *testing.T) {
	t.Parallel()
	_, db := dataDir(t)
	repDir := filepath.Join(t.TempDir(), "replica")
	srv := startServer(t, db, "--replica", "file://"+repDir, "--admin-addr", "127.0.0.1:0")
	body := func(id string) string {
		return fmt.Sprintf(`{"event":"job.completed","job_id":%q,"status":"COMPLETED"}`, id)
	}
	if code := send(t, http.DefaultClient, srv.url, body("first"), e2eSecret); code != http.StatusNoContent {
		t.Fatalf("send: %d", code)
	}
	until(t, "alert quiet while the replica keeps up", func() string {
		if out, errOut, code := adminRun(t, db, "alert", "--replica-lag", "3s"); code != 0 {
			return fmt.Sprintf("exit %d %s %s", code, out, errOut)
		}
		return ""
	})
	mend := breakReplica(t, repDir)
	for i := range 5 {
		if code := send(t, http.DefaultClient, srv.url, body(fmt.Sprint("during_", i)), e2eSecret); code != http.StatusNoContent {
			t.Fatalf("send with the replica gone, default mode: %d, want 204", code)
		}
	}
	until(t, "alert --replica-lag fires", func() string {
		out, errOut, code := adminRun(t, db, "alert", "--replica-lag", "3s")
		if code != 1 || !strings.Contains(out, "replica") {
			return fmt.Sprintf("exit %d %s %s", code, out, errOut)
		}
		return ""
	})
	if code, text := get(t, srv.admin+"/readyz"); code != http.StatusOK || !strings.Contains(text, "replica: cannot be reached") {
		t.Errorf("/readyz in the default mode with the replica gone: %d %q, want 200 with its line", code, text)
	}
	if code, text := get(t, srv.admin+"/metrics"); code != http.StatusOK || !strings.Contains(text, "inbox_replica_lag_seconds") || strings.Contains(text, "inbox_replica_errors_total 0\n") {
		t.Errorf("/metrics with the replica gone: want the lag and errors counted:\n%s", text)
	}
	mend()
	until(t, "alert --replica-lag clears once the replica is back", func() string {
		if out, errOut, code := adminRun(t, db, "alert", "--replica-lag", "3s"); code != 0 {
			return fmt.Sprintf("exit %d %s %s", code, out, errOut)
		}
		return ""
	})
	if n := strings.Count(srv.logs.String(), "replica cannot be reached"); n != 1 {
		t.Errorf("the outage was logged %d times, want once:\n%s", n, srv.logs)
	}
	out, _, _ := adminRun(t, db, "stats")
	if !strings.Contains(out, "REPLICA") || !strings.Contains(out, repDir) {
		t.Errorf("stats does not show the replica:\n%s", out)
	}
}

// TestReplicaFromConfig: [replica] in --config replicates as --replica
// does, and the flags win over it.
func TestReplicaFromConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "inbox.db")
	repDir := filepath.Join(dir, "replica")
	cfg := writeConfig(t, dir, sumeSourceTOML+"\n[replica]\nurl = \"file://"+repDir+"\"\nsync = true\nretention = \"24h\"\n")
	srv := startServer(t, db, "--config", cfg, "--replica-sync=false")
	if code := send(t, http.DefaultClient, srv.url, `{"event":"job.completed","job_id":"job_cfg","status":"COMPLETED"}`, e2eSecret); code != http.StatusNoContent {
		t.Fatalf("send: %d", code)
	}
	srv.signal(syscall.SIGTERM)
	<-srv.done
	out, errOut, code := adminRun(t, db, "stats")
	if code != 0 || !strings.Contains(out, repDir) || !strings.Contains(out, "trails the file") || !strings.Contains(out, "holds every commit") {
		t.Errorf("stats after serve with [replica] and --replica-sync=false: exit %d %s %s", code, out, errOut)
	}
	to := filepath.Join(t.TempDir(), "inbox.db")
	if out, errOut, code := runCLI(t, nil, "restore", "--replica", "file://"+repDir, "--to", to); code != 0 {
		t.Fatalf("restore: exit %d %s %s", code, out, errOut)
	}
	if out, errOut, code := adminRun(t, to, "show", "job_cfg"); code != 0 {
		t.Errorf("show job_cfg on the restored database: exit %d %s %s", code, out, errOut)
	}
}
