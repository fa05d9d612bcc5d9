package dispatch

import (
	"github.com/prometheus/client_golang/prometheus"
)

// The outcomes of a delivery attempt, as the deliveries metric labels them.
const (
	outcomeDone     = "done"                      // the application took it
	outcomeRetry    = "retry"                     // it failed; another attempt is scheduled
	outcomeFailed   = "handler_failed"            // it failed and no attempt is left: parked
	outcomeRejected = "handler_rejected"          // the application said never to retry: parked
	outcomeTooLarge = "too_large_for_destination" // the destination can never take it: parked
	outcomeDown     = "destination_down"          // it failed for the destination's outage: given back uncounted
)

// metrics are the dispatcher's counters. The queue's gauges are the store's
// (metrics.StoreCollector): serve shows them whichever process dispatches.
type metrics struct {
	deliveries *prometheus.CounterVec
	attempts   prometheus.Histogram
	duration   prometheus.Histogram
	stale      prometheus.Counter
	slow       prometheus.Gauge
	paused     prometheus.Gauge
	held       prometheus.Gauge
	down       prometheus.Gauge
	// reg is where they are registered (nil: nowhere).
	reg prometheus.Registerer
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inbox_dispatch_deliveries_total",
			Help: "Delivery attempts by outcome: done, retry, destination_down (the destination's outage: given back, no attempt counted), handler_failed (parked: no attempt left), handler_rejected (parked: the application said never retry), too_large_for_destination (parked: the destination can never take it).",
		}, []string{"outcome"}),
		attempts: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "inbox_dispatch_attempts",
			Help:    "Attempts a row took until it was done or parked.",
			Buckets: []float64{1, 2, 3, 4, 5, 6},
		}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "inbox_dispatch_attempt_duration_seconds",
			Help:    "How long one delivery attempt took, whatever its outcome.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 9),
		}),
		stale: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "inbox_dispatch_stale_outcomes_total",
			Help: "Outcomes dropped because the row's lease had run out and another claim had taken it over.",
		}),
		slow: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "inbox_dispatch_slow_attempts",
			Help: "Attempts under way past the slow threshold, gone on beside the workers (at most --max-slow).",
		}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "inbox_dispatch_held_rows",
			Help: "Rows claimed and not yet settled: under way, and waiting for a worker with their attempts counted, 4 to 16 a worker (more while the workers run out of rows); a crash costs each of those waiting one attempt.",
		}),
		paused: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "inbox_dispatch_paused",
			Help: "1 while the destination says it cannot be reached (a JetStream broker down or its stream not answering): no row is claimed or attempted, none uses up its retries; else 0.",
		}),
		down: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "inbox_dispatch_destination_down",
			Help: "1 while the destination is down (no answer, timeouts, 429, 502-504, or the same failure for several rows in a row): its rows wait with no attempt counted and one row at a time probes it; else 0.",
		}),
	}
	for _, o := range []string{outcomeDone, outcomeRetry, outcomeFailed, outcomeRejected, outcomeTooLarge, outcomeDown} {
		m.deliveries.WithLabelValues(o) // every outcome shows, from 0
	}
	if reg == nil {
		return m, nil
	}
	for i, c := range m.collectors() {
		if err := reg.Register(c); err != nil {
			for _, c := range m.collectors()[:i] {
				reg.Unregister(c)
			}
			return nil, err
		}
	}
	m.reg = reg
	return m, nil
}

// unregister removes the metrics from their registry, so that another
// dispatcher of the destination (a reload restarting it) can register its own.
func (m *metrics) unregister() {
	if m.reg == nil {
		return
	}
	for _, c := range m.collectors() {
		m.reg.Unregister(c)
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.deliveries, m.attempts, m.duration, m.stale, m.slow, m.paused, m.held, m.down}
}
