package sqlite_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"inbox/inbox"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

// TestOnCommit checks that the hook sees every commit, its size and its
// failure, before the callers get their answers.
func TestOnCommit(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "inbox.db")
	type commit struct {
		n   int
		err error
	}
	var mu sync.Mutex
	var commits []commit
	s := sqlitetest.MustOpenPath(t, path, sqlite.Options{
		BusyTimeout: 500 * time.Millisecond,
		OnCommit: func(c inbox.Commit) {
			if c.Took <= 0 {
				t.Errorf("commit took %v", c.Took)
			}
			mu.Lock()
			defer mu.Unlock()
			commits = append(commits, commit{c.N, c.Err})
		},
	})
	seen := func() []commit {
		mu.Lock()
		defer mu.Unlock()
		return append([]commit(nil), commits...)
	}
	for i, id := range []string{"job_1", "job_2", "job_1"} {
		if _, err := s.Put(context.Background(), job(id)); err != nil {
			t.Fatal(err)
		}
		if got := seen(); len(got) != i+1 || got[i].n != 1 || got[i].err != nil {
			t.Fatalf("after put %d: commits = %v, want %d of 1 delivery each", i+1, got, i+1)
		}
	}

	release := sqlitetest.HoldWriteLock(t, path)
	_, putErr := s.Put(context.Background(), job("job_locked"))
	release()
	got := seen()
	if putErr == nil || len(got) != 4 || got[3].err == nil {
		t.Fatalf("locked: put error %v, commits %v; want the failed commit reported", putErr, got)
	}

	// Concurrent puts share commits: the sizes add up to the puts.
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Put(context.Background(), job("job_c"+strings.Repeat("x", i))); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	total := 0
	for _, c := range seen()[4:] {
		total += c.n
	}
	if total != 50 {
		t.Errorf("commit sizes add up to %d, want 50", total)
	}
}
