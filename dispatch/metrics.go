package dispatch

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The outcomes of a delivery attempt, as the deliveries metric labels them.
const (
	outcomeDone     = "done"             // the application took it
	outcomeRetry    = "retry"            // it failed; another attempt is scheduled
	outcomeFailed   = "handler_failed"   // it failed and no attempt is left: parked
	outcomeRejected = "handler_rejected" // the application said never to retry: parked
)

// scrapeTimeout bounds the queue query a scrape runs.
const scrapeTimeout = 5 * time.Second

// metrics are the dispatcher's counters and the queue, read at scrape time.
type metrics struct {
	deliveries *prometheus.CounterVec
	attempts   prometheus.Histogram
	duration   prometheus.Histogram
	stale      prometheus.Counter
	queue      *queueCollector
}

func newMetrics(reg prometheus.Registerer, store Store, now func() time.Time) (*metrics, error) {
	m := &metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inbox_dispatch_deliveries_total",
			Help: "Delivery attempts by outcome: done, retry, handler_failed (parked: no attempt left), handler_rejected (parked: the application said never retry).",
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
		queue: newQueueCollector(store, now),
	}
	for _, o := range []string{outcomeDone, outcomeRetry, outcomeFailed, outcomeRejected} {
		m.deliveries.WithLabelValues(o) // every outcome shows, from 0
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.deliveries, m.attempts, m.duration, m.stale, m.queue} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// queueCollector reads the queue from the store at scrape time, so the
// gauges are right whichever process delivers the rows.
type queueCollector struct {
	store                             Store
	now                               func() time.Time
	depth, inFlight, retrying, oldest *prometheus.Desc
}

func newQueueCollector(store Store, now func() time.Time) *queueCollector {
	return &queueCollector{
		store:    store,
		now:      now,
		depth:    prometheus.NewDesc("inbox_queue_depth", "New rows: stored and not yet taken by the application.", nil, nil),
		inFlight: prometheus.NewDesc("inbox_queue_in_flight", "New rows a dispatcher holds a running lease on.", nil, nil),
		retrying: prometheus.NewDesc("inbox_queue_retrying", "New rows that failed at least once and wait for their next attempt.", nil, nil),
		oldest:   prometheus.NewDesc("inbox_queue_oldest_age_seconds", "How long the oldest new row has waited since it was received; 0 when none.", nil, nil),
	}
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.depth
	ch <- c.inFlight
	ch <- c.retrying
	ch <- c.oldest
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	now := c.now()
	q, err := c.store.Queue(ctx, now)
	if err != nil {
		for _, d := range []*prometheus.Desc{c.depth, c.inFlight, c.retrying, c.oldest} {
			ch <- prometheus.NewInvalidMetric(d, err)
		}
		return
	}
	ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(q.Depth))
	ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(q.InFlight))
	ch <- prometheus.MustNewConstMetric(c.retrying, prometheus.GaugeValue, float64(q.Retrying))
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, q.Age(now).Seconds())
}
