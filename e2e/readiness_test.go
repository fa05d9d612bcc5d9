package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestReadyzFollowsCommits fills the file system the database is on under
// load: once every delivery gets 503, /readyz fails too (an empty
// transaction would still pass: it writes nothing), and once the disk is
// freed and deliveries are stored again, it passes again.
func TestReadyzFollowsCommits(t *testing.T) {
	dir := mountTmpfs(t, "32m")
	db := filepath.Join(dir, "inbox.db")
	srv := startServer(t, db)
	ready := func() int { code, _ := get(t, srv.url[:len(srv.url)-len("/webhooks/sume")]+"/readyz"); return code }
	if got := ready(); got != http.StatusOK {
		t.Fatalf("/readyz before: %d, want 200", got)
	}

	l := &load{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { l.run(ctx, func() string { return srv.url }, 8, "ready"); close(done) }()
	waitFor(t, "deliveries stored", func() bool { n, _, _ := l.snapshot(); return n > 100 })

	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	must(t, err)
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			break // ENOSPC: the disk is full
		}
	}
	f.Close()
	full := time.Now()

	// Wait until commits fail outright: a full disk takes commits that
	// reuse the WAL's room for a while.
	failing := func() bool {
		before, statuses, _ := l.snapshot()
		time.Sleep(300 * time.Millisecond)
		after, later, _ := l.snapshot()
		return after == before && later[http.StatusServiceUnavailable] > statuses[http.StatusServiceUnavailable]
	}
	deadline := time.Now().Add(15 * time.Second)
	for !failing() {
		if time.Now().After(deadline) {
			t.Fatal("deliveries still stored 15s after the disk filled: the test proved nothing")
		}
	}
	t.Logf("every delivery answered 503 from %v after the disk filled", time.Since(full).Round(time.Millisecond))
	for range 3 {
		if got := ready(); got != http.StatusServiceUnavailable {
			t.Errorf("/readyz while every delivery gets 503 on a full disk: %d, want 503", got)
		}
		time.Sleep(100 * time.Millisecond)
	}

	must(t, os.Remove(filler))
	freed := time.Now()
	var last204 time.Time
	waitFor(t, "deliveries stored again", func() bool { _, _, last204 = l.snapshot(); return last204.After(freed) })
	waitFor(t, "/readyz to pass again", func() bool { return ready() == http.StatusOK })
	t.Logf("stored again %v and ready %v after the disk was freed", last204.Sub(freed).Round(time.Millisecond), time.Since(freed).Round(time.Millisecond))

	cancel()
	<-done
	// Without deliveries, /readyz still reports what a commit does now.
	if got := ready(); got != http.StatusOK {
		t.Errorf("/readyz once the load stopped: %d, want 200", got)
	}
	srv.signal(syscall.SIGTERM)
	<-srv.done
	checkStored(t, db, l.acked)
}
