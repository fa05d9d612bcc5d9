package main

import (
	"math"
	"time"
)

// Histogram buckets: 10 µs wide up to 200 ms, where p50 and p99 of a healthy
// receiver lie, then 1 ms wide up to the request timeout. Fixed buckets keep
// memory flat however many requests a run makes.
const (
	fineWidth   = 10 * time.Microsecond
	fineLimit   = 200 * time.Millisecond
	coarseWidth = time.Millisecond
	coarseLimit = requestTimeout + time.Second
	fineBuckets = int(fineLimit / fineWidth)
	numBuckets  = fineBuckets + int((coarseLimit-fineLimit)/coarseWidth) + 1 // +1: overflow
)

// histogram counts latencies. One per load worker, merged at the end, so the
// workers never share a counter.
type histogram struct {
	counts []uint32
	n      int64
	max    time.Duration
}

func newHistogram() *histogram { return &histogram{counts: make([]uint32, numBuckets)} }

func (h *histogram) add(d time.Duration) {
	var i int
	switch {
	case d < 0:
		i = 0
	case d < fineLimit:
		i = int(d / fineWidth)
	case d < coarseLimit:
		i = fineBuckets + int((d-fineLimit)/coarseWidth)
	default:
		i = numBuckets - 1
	}
	h.counts[i]++
	h.n++
	h.max = max(h.max, d)
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// quantile returns the upper edge of the bucket holding the q-th latency
// (nearest rank), so it errs high by at most one bucket width, and never
// more than the largest latency seen. It returns 0 when h is empty.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := max(int64(math.Ceil(q*float64(h.n))), 1)
	var seen int64
	for i, c := range h.counts {
		seen += int64(c)
		if seen < rank {
			continue
		}
		switch {
		case i < fineBuckets:
			return min(time.Duration(i+1)*fineWidth, h.max)
		case i < numBuckets-1:
			return min(fineLimit+time.Duration(i-fineBuckets+1)*coarseWidth, h.max)
		default:
			return h.max
		}
	}
	return h.max
}
