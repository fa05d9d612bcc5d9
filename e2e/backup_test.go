package e2e

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestBackupWhileServing runs `inbox backup` on the real binary's database
// while deliveries stream in, and checks that the copy is whole and holds
// every delivery acknowledged before the backup began.
func TestBackupWhileServing(t *testing.T) {
	t.Parallel()
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

// TestBackupRefusesLiveFiles points `inbox backup --force` at the live
// database and its -wal, -shm and -journal files, spelled every way that
// reaches them (a symbolic link, a linked folder, ".."), while
// serve takes deliveries: each is refused with one line, and afterwards the
// database is whole and holds every delivery acknowledged, before and
// after.
func TestBackupRefusesLiveFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(data, "inbox.db")
	srv := startServer(t, db)
	l, stopLoad := startLoad(t, srv, "live", 200)

	alias := filepath.Join(dir, "alias") // the data folder, by another path
	link := filepath.Join(dir, "link.db")
	for _, err := range []error{os.Symlink(data, alias), os.Symlink(db, link)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct{ db, dest string }{
		{db, db},
		{db, db + "-wal"},
		{db, db + "-shm"},
		{db, db + "-journal"}, // not there: a rename would make it
		{db, link},
		{db, filepath.Join(alias, "inbox.db")},
		{db, filepath.Join(alias, "inbox.db-wal")},
		{db, filepath.Join(data, "..", "data", "inbox.db")},
		{link, db},
		{link, filepath.Join(alias, "inbox.db-shm")},
	} {
		for _, force := range []bool{true, false} {
			args := []string{"backup", "--db", tt.db}
			if force {
				args = append(args, "--force")
			}
			out, errOut, code := runCLI(t, nil, append(args, tt.dest)...)
			if code == 0 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "it is the live database") {
				t.Errorf("backup --db %s (force %v) %s: exit %d, stdout %q, stderr %q; want a one-line refusal naming the live database",
					tt.db, force, tt.dest, code, out, errOut)
			}
			if strings.Contains(errOut, "--force to replace") {
				t.Errorf("backup %s: the refusal suggests --force: %q", tt.dest, errOut)
			}
		}
	}
	if _, err := os.Stat(db + "-journal"); err == nil {
		t.Errorf("a -journal file appeared beside the database")
	}
	// A copy beside the database, by a path through the linked folder, is
	// a backup like any other.
	copyPath := filepath.Join(alias, "copy.db")
	if _, errOut, code := runCLI(t, nil, "backup", "--db", db, copyPath); code != 0 {
		t.Fatalf("backup to %s: exit %d: %s", copyPath, code, errOut)
	}

	// serve went on storing: deliveries are still acknowledged, and every
	// one is in a database that passes integrity_check.
	before, _, _ := l.snapshot()
	waitFor(t, "deliveries after the refusals", func() bool { n, _, _ := l.snapshot(); return n > before+50 })
	stopLoad()
	if _, errOut, code := runCLI(t, nil, "stats", "--db", db); code != 0 {
		t.Errorf("stats after the refusals: exit %d: %s", code, errOut)
	}
	srv.signal(syscall.SIGTERM)
	<-srv.done
	checkStored(t, db, l.acked)
}
