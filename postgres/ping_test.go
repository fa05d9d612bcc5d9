package postgres_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"inbox/postgres"
)

// TestPingFollowsCommits holds the events table from another session
// while deliveries keep coming, so every group commit fails: Ping, which
// commits through the same writer, fails too, within the bound (a check
// that only asked the database whether it takes writes passed). Once the
// table is free, deliveries and Ping succeed again.
func TestPingFollowsCommits(t *testing.T) {
	t.Parallel()
	dsn := migratedURL(t)
	s := mustOpen(t, dsn, postgres.Options{BusyTimeout: busy})
	ctx := context.Background()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("ping before: %v", err)
	}
	if _, err := s.Put(ctx, job("job_1")); err != nil {
		t.Fatal(err)
	}
	held, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() { done <- holdTable(ctx, dsn, "events", held, release) }()
	select {
	case <-held:
	case err := <-done:
		t.Fatal(err)
	}
	var once sync.Once
	free := func() { once.Do(func() { close(release); <-done }) }
	t.Cleanup(free)

	lctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range 4 {
		wg.Go(func() {
			for lctx.Err() == nil {
				if _, err := s.Put(lctx, job("job_1")); err != nil {
					failed.Add(1)
				}
			}
		})
	}
	time.Sleep(busy) // the writer is stuck on the held table
	start := time.Now()
	err := s.Ping(ctx)
	took := time.Since(start)
	t.Logf("ping while every commit fails: %v after %s (bound %s); %d deliveries failed", err, took, bound, failed.Load())
	if err == nil || took > bound {
		t.Errorf("ping while every commit fails: %v after %s, want an error within %s", err, took, bound)
	}
	free()
	stop()
	wg.Wait()
	if err := s.Ping(ctx); err != nil {
		t.Errorf("ping once the table is free: %v", err)
	}
	if _, err := s.Put(ctx, job("job_1")); err != nil {
		t.Errorf("put once the table is free: %v", err)
	}
}
