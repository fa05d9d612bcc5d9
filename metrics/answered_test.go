package metrics_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"inbox/metrics"
)

// TestAnsweredAllocates counts what recording one answer allocates once
// its series exist: nothing, where looking the series up by their label
// values took several allocations per request. The counts it leaves are
// those of the answers recorded, series by series.
func TestAnsweredAllocates(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	answered := m.Answered("sume")
	answered("stored", "", 204, time.Millisecond) // the series now exist
	allocs := testing.AllocsPerRun(1000, func() { answered("stored", "", 204, time.Millisecond) })
	t.Logf("allocations per answer recorded: %.1f", allocs)
	if allocs > 0 {
		t.Errorf("%.1f allocations per answer recorded, want 0", allocs)
	}
	answered("parked", "unknown_event", 204, time.Millisecond)
	answered("rejected", "mismatch", 401, time.Millisecond)
	want := `
# HELP inbox_deliveries_total Requests on a source's webhook path by outcome: stored, revived, duplicate, ignored, parked (reason: why), rejected (reason: the check that failed), store_error, overloaded.
# TYPE inbox_deliveries_total counter
inbox_deliveries_total{outcome="overloaded",reason="",source="sume"} 0
inbox_deliveries_total{outcome="parked",reason="unknown_event",source="sume"} 1
inbox_deliveries_total{outcome="rejected",reason="mismatch",source="sume"} 1
inbox_deliveries_total{outcome="store_error",reason="",source="sume"} 0
inbox_deliveries_total{outcome="stored",reason="",source="sume"} 1002
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "inbox_deliveries_total"); err != nil {
		t.Error(err)
	}
	n := testutil.CollectAndCount(reg, "inbox_request_duration_seconds")
	if n != 2 {
		t.Errorf("%d request duration series, want 2 (204 and 401)", n)
	}
}

// TestAnsweredManySeries records more distinct answers than are kept at
// hand: each is still counted on its own series.
func TestAnsweredManySeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	answered := metrics.New(reg).Answered("sume")
	const n = 600
	for i := range n {
		answered("rejected", fmt.Sprintf("cause_%d", i), 400, time.Millisecond)
		answered("rejected", fmt.Sprintf("cause_%d", i), 400, time.Millisecond)
	}
	if got := testutil.CollectAndCount(reg, "inbox_deliveries_total"); got != n+2 {
		t.Errorf("%d delivery series, want %d", got, n+2)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "inbox_deliveries_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if v := m.GetCounter().GetValue(); v != 2 && v != 0 {
				t.Errorf("%v counted %v, want 2", m.GetLabel(), v)
			}
		}
	}
}

// BenchmarkAnswered records one answer, as every webhook request does.
// Run: go test -run '^$' -bench Answered -benchmem ./metrics
func BenchmarkAnswered(b *testing.B) {
	answered := metrics.New(prometheus.NewRegistry()).Answered("sume")
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			answered("stored", "", 204, time.Millisecond)
		}
	})
}
