package admin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"inbox/inbox"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

func TestBackup(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	fill(t, db, time.Now(), completed("job_1"), completed("job_2"), exploded("job_3"))
	dir := t.TempDir()
	dest := filepath.Join(dir, "copy.db")

	out, err := run(t, "backup", "--db", db, dest)
	if err != nil || out != "copied 3 rows to "+dest+"\n" {
		t.Fatalf("backup: %q, %v", out, err)
	}
	fi, err := os.Stat(dest)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("copy: %v, mode %v; want 0600", err, fi.Mode())
	}
	copied := sqlitetest.MustOpenPath(t, dest, sqlite.Options{ReadOnly: true})
	if ev, err := copied.Get(t.Context(), "job_3"); err != nil || ev.Reason != inbox.ReasonUnknownEvent {
		t.Errorf("job_3 in the copy: %+v, %v", ev, err)
	}
	copied.Close()

	// An existing PATH is kept unless --force.
	fill(t, db, time.Now(), completed("job_4"))
	if _, err := run(t, "backup", "--db", db, dest); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Errorf("backup over an existing file: %v, want a refusal naming --force", err)
	}
	if out, err := run(t, "backup", "--db", db, "--force", "--json", dest); err != nil || out != `{"path":"`+dest+`","rows":4}`+"\n" {
		t.Errorf("backup --force --json: %q, %v", out, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("left in the folder: %v, want only the copy", entries)
	}

	for _, args := range [][]string{
		{"backup", "--db", db},
		{"backup", "--db", db, dest, "other"},
		{"backup", "--db", filepath.Join(dir, "missing.db"), filepath.Join(dir, "new.db")},
		{"backup", "--db", db, filepath.Join(dir, "no", "such", "folder.db")},
	} {
		if _, err := run(t, args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("failed backups left %v", entries)
	}
}
