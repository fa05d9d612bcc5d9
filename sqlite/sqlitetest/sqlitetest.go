// Package sqlitetest opens real SQLite inbox stores for tests.
package sqlitetest

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"inbox/sqlite"
)

// Schema returns the contents of the module's schema.sql, the one copy that
// the binary embeds.
func Schema(tb testing.TB) string {
	tb.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		tb.Fatal("sqlitetest: cannot locate schema.sql")
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "schema.sql"))
	if err != nil {
		tb.Fatalf("sqlitetest: %v", err)
	}
	return string(b)
}

// MustOpen opens a store on a fresh SQLite file in tb.TempDir(), with the
// schema applied, and closes it when the test ends.
func MustOpen(tb testing.TB, opts sqlite.Options) *sqlite.Store {
	tb.Helper()
	return MustOpenPath(tb, filepath.Join(tb.TempDir(), "inbox.db"), opts)
}

// MustOpenPath is MustOpen on a given path.
func MustOpenPath(tb testing.TB, path string, opts sqlite.Options) *sqlite.Store {
	tb.Helper()
	if opts.Schema == "" && !opts.ReadOnly {
		opts.Schema = Schema(tb)
	}
	s, err := sqlite.Open(context.Background(), path, opts)
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("close store: %v", err)
		}
	})
	return s
}

// HoldWriteLock takes the write lock of the database at path from a
// connection of its own, as another process would, and returns the
// function that releases it (also called when the test ends).
func HoldWriteLock(tb testing.TB, path string) (release func()) {
	tb.Helper()
	db, err := sql.Open("sqlite", path+"?_txlock=immediate")
	if err != nil {
		tb.Fatalf("sqlitetest: %v", err)
	}
	tx, err := db.Begin()
	if err != nil {
		db.Close()
		tb.Fatalf("sqlitetest: take the write lock: %v", err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			tx.Rollback()
			db.Close()
		})
	}
	tb.Cleanup(release)
	return release
}
