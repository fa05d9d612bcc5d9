package metrics_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"inbox/inbox"
	"inbox/metrics"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

// slowCounts is a store whose counting takes as long as a large inbox's.
type slowCounts struct {
	*sqlite.Store
	took time.Duration
}

func (s slowCounts) CountByStatus(ctx context.Context) (map[inbox.Status]int64, error) {
	select {
	case <-time.After(s.took):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Store.CountByStatus(ctx)
}

// TestStoreCollectorSlowCounts has the store take 300 ms to count, with a
// scrape budget of 1 s: once Run has read in the background, a scrape
// reports that read at once, with its age, instead of waiting.
func TestStoreCollectorSlowCounts(t *testing.T) {
	store := slowCounts{sqlitetest.MustOpen(t, sqlite.Options{}), 300 * time.Millisecond}
	c := metrics.NewStoreCollector(store, time.Second, nil)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-ran; err != nil {
			t.Error(err)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		start := time.Now()
		n, err := testutil.GatherAndCount(reg, "inbox_store_read_age_seconds")
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 && took < 100*time.Millisecond {
			break // the background read, at once
		}
		if time.Now().After(deadline) {
			t.Fatalf("every scrape waited for the store (the last %s)", took)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP inbox_rows Rows in the inbox by status.
# TYPE inbox_rows gauge
inbox_rows{status="dismissed"} 0
inbox_rows{status="done"} 0
inbox_rows{status="ignored"} 0
inbox_rows{status="new"} 0
inbox_rows{status="parked"} 0
`), "inbox_rows"); err != nil {
		t.Error(err)
	}
}
