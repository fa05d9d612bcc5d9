//go:build unix

package sqlite_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"inbox/inbox"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

// BenchmarkDispatchCycle drains stored rows as the dispatcher does at 32
// workers: each transaction settles the last batch done and claims the
// next 64, counting their attempts. One op is one row; its time and its
// CPU time (cpu-ns/op, the whole process's) are the store's alone, no
// destination.
func BenchmarkDispatchCycle(b *testing.B) {
	s := sqlitetest.MustOpen(b, sqlite.Options{})
	ctx := context.Background()
	pad := strings.Repeat("x", 512)
	// Stored from many goroutines at once, so that their commits are few.
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Go(func() {
			for i := w; i < b.N; i += 32 {
				body := fmt.Sprintf(`{"event":"job.completed","job_id":"job_%08d","status":"COMPLETED","payload":{"pad":%q}}`, i, pad)
				if _, err := s.Put(ctx, inbox.Classify("", inbox.Named{}, []byte(body), 1_800_000_000, rules)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ResetTimer()
	cpu0 := processCPU(b)
	defer func() { b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op") }()
	var done []inbox.Settlement
	for left := b.N; left > 0 || len(done) > 0; {
		now := time.Now()
		want := min(64, left)
		jobs, _, err := s.Settle(ctx, "bench", done, inbox.Claim{Now: now, Until: now.Add(time.Minute), Max: want, Start: want})
		if err != nil {
			b.Fatal(err)
		}
		left -= len(jobs)
		done = done[:0]
		for _, j := range jobs {
			done = append(done, inbox.Settlement{Job: j, Fate: inbox.FateDone, At: now})
		}
		if want > 0 && len(jobs) == 0 {
			b.Fatalf("claimed none of %d rows left", left)
		}
	}
}

// processCPU is the user and system time this process has used.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Skip("no rusage:", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
