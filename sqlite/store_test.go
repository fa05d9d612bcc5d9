package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"inbox/inbox"
	"inbox/inbox/storetest"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

// The suite's rules and deliveries, for this package's own tests.
var (
	rules = storetest.Rules
	job   = storetest.Job
)

// TestGroupCommit puts many deliveries at once, with repeats, and checks
// that each caller gets its own outcome and every row is there once.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	s := sqlitetest.MustOpen(t, sqlite.Options{MaxBatch: 16})
	const n = 400
	var wg sync.WaitGroup
	results := make([]inbox.Result, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Every id is sent twice: i and i+n/2 share one.
			results[i], errs[i] = s.Put(context.Background(), job(fmt.Sprintf("job_%d", i%(n/2))))
		}()
	}
	wg.Wait()
	outcomes := map[inbox.Outcome]int{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("put %d: %v", i, errs[i])
		}
		outcomes[results[i].Outcome]++
	}
	if outcomes[inbox.OutcomeStored] != n/2 || outcomes[inbox.OutcomeDuplicate] != n/2 {
		t.Errorf("outcomes = %v, want %d stored and %d duplicate", outcomes, n/2, n/2)
	}
	rows, err := s.List(context.Background(), inbox.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != n/2 {
		t.Fatalf("got %d rows, want %d", len(rows), n/2)
	}
	for _, r := range rows {
		if r.Deliveries != 2 {
			t.Fatalf("row %s has %d deliveries, want 2", r.ID, r.Deliveries)
		}
	}
}

// TestPragmasOnEveryConnection opens several read connections at once and
// checks each one, and the writer, through the store's own DSNs.
func TestPragmasOnEveryConnection(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "inbox.db")
	s := sqlitetest.MustOpenPath(t, path, sqlite.Options{BusyTimeout: 1234 * time.Millisecond})
	if _, err := s.Put(context.Background(), job("job_1")); err != nil {
		t.Fatal(err)
	}
	for name, p := range sqlite.PragmasForTest(s) {
		for i, got := range p {
			if got.JournalMode != "wal" || got.BusyTimeout != 1234 {
				t.Errorf("%s connection %d: journal_mode=%s busy_timeout=%d", name, i, got.JournalMode, got.BusyTimeout)
			}
			if name == "write" && (got.Synchronous != 2 || got.QueryOnly || got.AutoCheckpoint != 1_000) {
				t.Errorf("write connection: synchronous=%d query_only=%v wal_autocheckpoint=%d, want 2, false and 1000 (a WAL that stays small)",
					got.Synchronous, got.QueryOnly, got.AutoCheckpoint)
			}
			if name == "read" && !got.QueryOnly {
				t.Errorf("read connection %d is not query_only", i)
			}
		}
	}
}

func TestFileMode(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "inbox.db")
	s := sqlitetest.MustOpenPath(t, path, sqlite.Options{})
	if _, err := s.Put(context.Background(), job("job_1")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if mode := fi.Mode().Perm(); mode != 0o600 {
			t.Errorf("%s: mode %o, want 600", filepath.Base(p), mode)
		}
	}
}

func TestOpenMustExist(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "missing.db")
	_, err := sqlite.Open(context.Background(), path, sqlite.Options{MustExist: true})
	if err == nil {
		t.Fatal("no error for a missing database")
	}
	if _, statErr := os.Stat(path); !errors.Is(statErr, os.ErrNotExist) {
		t.Errorf("Open created %s", path)
	}
}

func TestReadOnlyRefusesWrites(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "inbox.db")
	sqlitetest.MustOpenPath(t, path, sqlite.Options{})
	ro := sqlitetest.MustOpenPath(t, path, sqlite.Options{ReadOnly: true})
	if _, err := ro.Put(context.Background(), job("job_1")); err == nil {
		t.Fatal("read-only store accepted a write")
	}
}

// TestFailedBatchFailsOnlyItself holds the write lock from another
// connection so one batch fails, then checks the next one commits. The
// busy timeout is long enough that the next batch's commit, on a file
// system other packages' tests keep busy, is not refused for being slow.
func TestFailedBatchFailsOnlyItself(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "inbox.db")
	s := sqlitetest.MustOpenPath(t, path, sqlite.Options{BusyTimeout: 500 * time.Millisecond})
	other, err := sql.Open("sqlite", path+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(context.Background(), job("job_locked")); err == nil {
		t.Fatal("Put succeeded while another process held the write lock")
	}
	tx.Rollback()
	if _, err := s.Put(context.Background(), job("job_after")); err != nil {
		t.Fatalf("Put after the lock was released: %v", err)
	}
	if _, err := s.Get(context.Background(), "job_locked"); !errors.Is(err, inbox.ErrNotFound) {
		t.Errorf("failed delivery was kept: %v", err)
	}
}

// TestOpenPathAsGiven opens paths SQLite would read as URI syntax (a
// space, a percent escape): the file made is the one named, and a path
// that names no file is not created by a later connection either.
func TestOpenPathAsGiven(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "my inbox%20.db")
	s := sqlitetest.MustOpenPath(t, path, sqlite.Options{})
	if _, err := s.Put(t.Context(), job("job_1")); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "my inbox%20.db") {
			t.Errorf("made %q beside %q", e.Name(), filepath.Base(path))
		}
	}
}

// TestFileLost renames the database away under an open store: Put and Ping
// fail with ErrFileLost, OnFileLost hears of it once, nothing is created at
// the path, and once the file is back both work again.
func TestFileLost(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "inbox.db")
	var mu sync.Mutex
	var heard []error
	s := sqlitetest.MustOpenPath(t, path, sqlite.Options{BusyTimeout: 200 * time.Millisecond, OnFileLost: func(err error) {
		mu.Lock()
		defer mu.Unlock()
		heard = append(heard, err)
	}})
	if _, err := s.Put(t.Context(), job("job_1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("ping: %v", err)
	}
	if err := os.Rename(path, path+".moved"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := s.Put(t.Context(), job(fmt.Sprintf("job_lost_%d", i))); !errors.Is(err, sqlite.ErrFileLost) {
			t.Errorf("put after the rename: %v, want ErrFileLost", err)
		}
	}
	if err := s.Ping(t.Context()); !errors.Is(err, sqlite.ErrFileLost) {
		t.Errorf("ping after the rename: %v, want ErrFileLost", err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Errorf("a database was created at %s", path)
	}
	if err := os.Rename(path+".moved", path); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(t.Context(), job("job_2")); err != nil {
		t.Errorf("put once the file is back: %v", err)
	}
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("ping once the file is back: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(heard) != 2 || !errors.Is(heard[0], sqlite.ErrFileLost) || heard[1] != nil {
		t.Errorf("OnFileLost heard %v, want the loss once, then nil", heard)
	}
	for _, id := range []string{"job_1", "job_2"} {
		if _, err := s.Get(t.Context(), id); err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}
	if _, err := s.Get(t.Context(), "job_lost_0"); err == nil {
		t.Error("a delivery refused while the file was lost is stored")
	}
}
