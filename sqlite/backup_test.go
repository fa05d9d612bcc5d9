package sqlite_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"inbox/inbox"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

// TestBackup copies a store that is being written to and checks the copy
// is a whole database holding at least what was committed before.
func TestBackup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := sqlitetest.MustOpenPath(t, filepath.Join(dir, "inbox.db"), sqlite.Options{})
	ctx := context.Background()
	for i := range 20 {
		if _, err := s.Put(ctx, job("job_"+strings.Repeat("b", i+1))); err != nil {
			t.Fatal(err)
		}
	}
	copyPath := filepath.Join(dir, "copy.db")
	if n, err := s.Backup(ctx, copyPath); err != nil || n != 20 {
		t.Fatalf("backup: %d rows, %v; want 20", n, err)
	}
	if _, err := s.Backup(ctx, copyPath); err == nil {
		t.Error("backup over an existing database succeeded")
	}
	c := sqlitetest.MustOpenPath(t, copyPath, sqlite.Options{ReadOnly: true})
	rows, err := c.List(ctx, inbox.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 20 {
		t.Errorf("copy holds %d rows, want 20", len(rows))
	}
}
