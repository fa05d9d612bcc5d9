package sqlite_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"inbox/inbox"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

// guarded opens a store on path that records what OnFileLost hears, and
// closes it when the test ends (its Close may fail once the file is lost).
func guarded(t *testing.T, path string) (*sqlite.Store, func() []error) {
	t.Helper()
	var mu sync.Mutex
	var heard []error
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{Schema: sqlitetest.Schema(t),
		BusyTimeout: 500 * time.Millisecond, OnFileLost: func(err error) {
			mu.Lock()
			defer mu.Unlock()
			heard = append(heard, err)
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, func() []error {
		mu.Lock()
		defer mu.Unlock()
		return append([]error(nil), heard...)
	}
}

// bigJob is a stored job with a body of n bytes, so that rows grow the
// file.
func bigJob(id string, n int) inbox.Delivery {
	body := fmt.Sprintf(`{"event":"job.completed","job_id":%q,"status":"COMPLETED","pad":%q}`, id, strings.Repeat("x", n))
	return inbox.Classify("", inbox.Named{}, []byte(body), 1, inbox.Rules{Events: []string{"job.completed"}, MaxBody: 1 << 20})
}

// fill stores n rows with 4 KiB bodies and waits for the checkpointer to
// copy them into the database file.
func fill(t *testing.T, s *sqlite.Store, prefix string, n int) {
	t.Helper()
	for i := range n {
		if _, err := s.Put(t.Context(), bigJob(fmt.Sprintf("%s_%d", prefix, i), 4096)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
}

// TestOverwrittenInPlace writes over the database file under an open
// store, keeping its inode, every way an operator might (a backup copied
// over it, an older copy of it, emptied, truncated, its header zeroed):
// within a second and a half Put and Ping fail with ErrFileLost saying it
// was overwritten, OnFileLost hears it once, and it stays so.
func TestOverwrittenInPlace(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		// overwrite writes over path, the store's database, in place.
		overwrite func(t *testing.T, s *sqlite.Store, path string)
	}{
		{"backup copied over", func(t *testing.T, s *sqlite.Store, path string) {
			copyPath := filepath.Join(t.TempDir(), "backup.db")
			if _, err := s.Backup(t.Context(), copyPath); err != nil {
				t.Fatal(err)
			}
			writeOver(t, path, readAll(t, copyPath))
		}},
		{"older copy", func(t *testing.T, s *sqlite.Store, path string) {
			old := readAll(t, path)
			fill(t, s, "later", 40)
			writeOver(t, path, old)
		}},
		{"emptied", func(t *testing.T, s *sqlite.Store, path string) {
			if err := os.Truncate(path, 0); err != nil {
				t.Fatal(err)
			}
		}},
		{"truncated", func(t *testing.T, s *sqlite.Store, path string) {
			if err := os.Truncate(path, 3*4096); err != nil {
				t.Fatal(err)
			}
		}},
		{"header zeroed", func(t *testing.T, s *sqlite.Store, path string) {
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt(make([]byte, 16), 0); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "inbox.db")
			s, heard := guarded(t, path)
			fill(t, s, "job", 40)
			if err := s.Ping(t.Context()); err != nil {
				t.Fatalf("ping before: %v", err)
			}
			at := time.Now()
			tt.overwrite(t, s, path)
			var err error
			for time.Since(at) < 3*time.Second {
				if err = s.Ping(t.Context()); err != nil {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			took := time.Since(at)
			t.Logf("noticed %v after the overwrite: %v", took.Round(time.Millisecond), err)
			if !errors.Is(err, sqlite.ErrFileLost) || !strings.Contains(err.Error(), "overwritten in place") {
				t.Fatalf("ping after the overwrite: %v, want ErrFileLost saying it was overwritten", err)
			}
			if took > 1500*time.Millisecond {
				t.Errorf("noticed %v after the overwrite, want within 1.5s", took)
			}
			if _, err := s.Put(t.Context(), bigJob("job_after", 10)); !errors.Is(err, sqlite.ErrFileLost) {
				t.Errorf("put after the overwrite: %v, want ErrFileLost", err)
			}
			if _, err := s.Get(t.Context(), "job_0"); !errors.Is(err, sqlite.ErrFileLost) {
				t.Errorf("get after the overwrite: %v, want ErrFileLost (it would read a mix of two databases)", err)
			}
			time.Sleep(250 * time.Millisecond)
			if err := s.Ping(t.Context()); !errors.Is(err, sqlite.ErrFileLost) {
				t.Errorf("ping later: %v, want ErrFileLost still", err)
			}
			if h := heard(); len(h) != 1 || !errors.Is(h[0], sqlite.ErrFileLost) {
				t.Errorf("OnFileLost heard %v, want the loss once", h)
			}
		})
	}
}

// TestOtherWritersAreNoOverwrite runs a second store on the same file, as
// the operator's commands open it beside serve, opened and closed again
// and again, committing rows that grow the file and checkpointing them,
// while the first keeps committing: neither ever takes that for the file
// being overwritten. It runs alone, not beside the parallel tests: its
// stores' busy timeouts are short for a machine kept busy by others.
func TestOtherWritersAreNoOverwrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inbox.db")
	s, heard := guarded(t, path)
	ctx, stop := context.WithTimeout(t.Context(), 3*time.Second)
	defer stop()
	var wg sync.WaitGroup
	var puts int
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			if _, err := s.Put(context.Background(), bigJob(fmt.Sprintf("serve_%d", i), 8192)); err != nil {
				t.Errorf("put %d: %v", i, err)
				return
			}
			puts++
		}
	})
	for round := 0; ctx.Err() == nil; round++ {
		other, err := sqlite.Open(context.Background(), path, sqlite.Options{MustExist: true, BusyTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			if _, err := other.Put(context.Background(), bigJob(fmt.Sprintf("cmd_%d_%d", round, i), 16384)); err != nil {
				t.Errorf("other's put: %v", err)
			}
		}
		time.Sleep(150 * time.Millisecond) // its checkpointer's turn
		if err := other.Close(); err != nil {
			t.Errorf("other's close: %v", err)
		}
	}
	wg.Wait()
	t.Logf("%d puts beside the other store", puts)
	if h := heard(); len(h) != 0 {
		t.Errorf("OnFileLost heard %v, want nothing", h)
	}
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("ping: %v", err)
	}
}

func readAll(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeOver writes b over the file at path in place, as cp does: the same
// inode, truncated, then written.
func writeOver(t *testing.T, path string, b []byte) {
	t.Helper()
	if bytes.Equal(readAll(t, path), b) {
		t.Fatal("the copy is the database as it is")
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestCommitChecksFilesTwice commits deliveries one at a time: each commit
// checks the files twice, inside the COMMIT and once it has returned, and
// no more (each check stats every watched path). It runs alone, not beside
// the parallel tests: a slower run would see more of the checkpointer's
// ticks.
func TestCommitChecksFilesTwice(t *testing.T) {
	s, _ := guarded(t, filepath.Join(t.TempDir(), "inbox.db"))
	const n = 20
	before := sqlite.GuardChecksForTest(s)
	for i := range n {
		if _, err := s.Put(t.Context(), bigJob(fmt.Sprintf("job_%d", i), 10)); err != nil {
			t.Fatal(err)
		}
	}
	// The checkpointer's tick checks too, every 100ms.
	checks := sqlite.GuardChecksForTest(s) - before
	t.Logf("%d checks for %d commits", checks, n)
	if checks > 2*n+3 {
		t.Errorf("%d checks for %d commits, want at most two a commit", checks, n)
	}
}
