package main

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
)

// TestBackupWhileServing runs `inbox backup` on the real binary's database
// while deliveries stream in, and checks that the copy is whole and holds
// every delivery acknowledged before the backup began.
func TestBackupWhileServing(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "inbox.db")
	srv := startServer(t, db)
	l, stopLoad := startLoad(t, srv, "backup", 300)

	l.mu.Lock()
	before := append([]string(nil), l.acked...)
	l.mu.Unlock()
	dest := filepath.Join(dir, "backup.db")
	out, errOut, code := runCLI(t, nil, "backup", "--db", db, dest)
	during, _, _ := l.snapshot()
	stopLoad()
	srv.signal(syscall.SIGTERM)
	<-srv.done
	if code != 0 {
		t.Fatalf("backup: exit %d: %s", code, errOut)
	}
	if during <= len(before) {
		t.Fatalf("no delivery was acknowledged while the backup ran (%d before, %d after): it proved nothing", len(before), during)
	}

	var rows int
	if _, err := fmt.Sscanf(out, "copied %d rows", &rows); err != nil {
		t.Fatalf("backup printed %q", out)
	}
	checkStored(t, dest, before)
	conn, err := sql.Open("sqlite", dest+"?_pragma=query_only(ON)")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var inCopy int
	if err := conn.QueryRow("SELECT count(*) FROM events").Scan(&inCopy); err != nil {
		t.Fatal(err)
	}
	total := len(readRows(t, db))
	t.Logf("acknowledged before the backup %d, in the copy %d, at the end %d", len(before), inCopy, total)
	if inCopy != rows || inCopy < len(before) || inCopy > total {
		t.Errorf("copy holds %d rows (printed %d); want at least the %d acknowledged before, at most the %d at the end",
			inCopy, rows, len(before), total)
	}
}
