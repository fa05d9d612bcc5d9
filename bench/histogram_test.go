package main

import (
	"testing"
	"time"
)

func TestHistogramQuantile(t *testing.T) {
	h := newHistogram()
	for range 98 {
		h.add(time.Millisecond)
	}
	h.add(500 * time.Millisecond) // coarse buckets
	h.add(20 * time.Second)       // past the last bucket
	for _, tc := range []struct {
		q        float64
		min, max time.Duration
	}{
		{0.50, time.Millisecond, time.Millisecond + fineWidth},
		{0.98, time.Millisecond, time.Millisecond + fineWidth},
		{0.99, 500 * time.Millisecond, 500*time.Millisecond + coarseWidth},
		{1.00, 20 * time.Second, 20 * time.Second},
	} {
		if got := h.quantile(tc.q); got < tc.min || got > tc.max {
			t.Errorf("quantile(%v) = %v, want %v to %v", tc.q, got, tc.min, tc.max)
		}
	}
	if got := newHistogram().quantile(0.5); got != 0 {
		t.Errorf("empty quantile = %v, want 0", got)
	}

	merged := newHistogram()
	merged.merge(h)
	merged.merge(h)
	if merged.n != 2*h.n || merged.quantile(0.99) != h.quantile(0.99) {
		t.Errorf("merged n=%d p99=%v, want n=%d p99=%v", merged.n, merged.quantile(0.99), 2*h.n, h.quantile(0.99))
	}
}
