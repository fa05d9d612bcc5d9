package sqlite_test

import (
	"context"
	"database/sql"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

// TestUpgradeDiskFull: an upgrade that rebuilds tables on a disk without
// the room to copy them fails saying how much room it needs and what to
// do, and leaves every row as it was.
func TestUpgradeDiskFull(t *testing.T) {
	t.Parallel()
	old := v3DB(t)
	db, err := sql.Open("sqlite", old)
	if err != nil {
		t.Fatal(err)
	}
	// About 8 MiB of rows: the copy needs as much again.
	if _, err := db.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 2000)
		INSERT INTO events (id, status, body, size, sha256, delivery_ts, received_at, last_seen_at, updated_at)
		SELECT 'big_' || i, 'new', randomblob(4096), 4096, 'x', i, i, i, i FROM n`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	fi, err := os.Stat(old)
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=12m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs here (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	path := filepath.Join(dir, "inbox.db")
	copyFile(t, old, path)

	_, err = sqlite.Open(context.Background(), path, sqlite.Options{Schema: sqlitetest.Schema(t)})
	if err == nil {
		t.Fatalf("a %d-byte file upgraded on a 12 MiB disk", fi.Size())
	}
	for _, want := range []string{"full", "MiB", "free", "nothing was changed", "inbox migrate"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q: does not say %q", err, want)
		}
	}
	// Nothing lost: the same rows, and the upgrade goes through where
	// there is room.
	roomy := filepath.Join(t.TempDir(), "inbox.db")
	copyFile(t, path, roomy)
	if got, want := dump(t, roomy, old, rebuiltTables...), dump(t, old, old, rebuiltTables...); got != want {
		t.Errorf("rows after the failed upgrade differ from before")
	}
	s, err := sqlite.Open(context.Background(), roomy, sqlite.Options{Schema: sqlitetest.Schema(t)})
	if err != nil {
		t.Fatalf("upgrade with room: %v", err)
	}
	s.Close()
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
