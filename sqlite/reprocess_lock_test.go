package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"inbox/inbox"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

// TestReprocessLeavesTheLockToDeliveries reprocesses rows with large
// bodies on a real file while another Store on the same file, as serve
// would, keeps storing deliveries with serve's busy timeout: none fails,
// and none waits as long as a third of the reprocess, as one does (about
// half of it) if the reprocess holds the write lock through one
// transaction instead of taking turns. It runs alone, not beside the package's parallel tests; the
// bound is a ratio, not a time, since other packages' tests may be
// writing to the same disk meanwhile.
func TestReprocessLeavesTheLockToDeliveries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inbox.db")
	admin := sqlitetest.MustOpenPath(t, path, sqlite.Options{})
	const rows, size = 48, 3 << 19 // 72 MiB in all, about ten turns: too large under rules, storable under 4 MiB
	bodies := make([]string, rows)
	for i := range bodies {
		// The pad needs no escapes, so it is quoted by hand: %q spent
		// half a second of CPU on its 36 MiB.
		bodies[i] = fmt.Sprintf(`{"event":"job.completed","job_id":"job_big_%d","status":"COMPLETED","pad":"%s"}`, i, strings.Repeat("x", size))
	}
	putAll(t, admin, bodies)

	serve := sqlitetest.MustOpenPath(t, path, sqlite.Options{BusyTimeout: inbox.DefaultBusyTimeout})
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var puts, failed, slowest atomic.Int64
	var firstErr atomic.Value
	for w := range 2 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				began := time.Now()
				_, err := serve.Put(context.Background(), job(fmt.Sprintf("job_live_%d_%d", w, i)))
				puts.Add(1)
				for d := time.Since(began); ; {
					if m := slowest.Load(); int64(d) <= m || slowest.CompareAndSwap(m, int64(d)) {
						break
					}
				}
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	r := rules
	r.MaxBody = 4 << 20
	start := time.Now()
	rep, err := admin.Reprocess(context.Background(), inbox.Selection{Reason: inbox.ReasonTooLarge}, inbox.SourceRules{inbox.DefaultSource: r}, false)
	took := time.Since(start)
	stop()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Moved != rows {
		t.Errorf("report %+v, want %d moved", rep, rows)
	}
	if failed.Load() > 0 || puts.Load() == 0 {
		t.Errorf("%d of %d deliveries failed while reprocess ran (%s): %v", failed.Load(), puts.Load(), took, firstErr.Load())
	}
	if slow := time.Duration(slowest.Load()); 3*slow >= took {
		t.Errorf("a delivery waited %s of the reprocess's %s: it held the write lock, not taking turns", slow, took)
	}
	t.Logf("reprocess took %s; %d deliveries meanwhile, the slowest in %s", took, puts.Load(), time.Duration(slowest.Load()))
}
