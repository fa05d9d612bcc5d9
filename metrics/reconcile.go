package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"inbox/inbox"
)

// Reconcile counts the reconciler's requests to the provider's API.
type Reconcile struct {
	requests *prometheus.CounterVec
}

// NewReconcile registers the reconciler's counters on reg.
func NewReconcile(reg prometheus.Registerer) *Reconcile {
	m := &Reconcile{requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace,
		Name:      "reconcile_requests_total",
		Help:      "Requests to the provider's API for overdue expected jobs, by request (status, redeliver) and result (ok, unknown_job, busy, failed).",
	}, []string{"request", "result"})}
	reg.MustRegister(m.requests)
	return m
}

// Requested counts one request; it fits reconcile.Config.OnRequest.
func (m *Reconcile) Requested(request, result string) {
	m.requests.WithLabelValues(request, result).Inc()
}

// Refusals registers the gauge of refused keys held in memory, not yet in
// the store, and the counter of those dropped because the memory was full.
func Refusals(reg prometheus.Registerer, held func() int, dropped func() int64) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: namespace,
			Name:      "refusals_held",
			Help:      "Keys of deliveries answered 503 (the store could not take them) held in memory until the store takes writes again.",
		}, func() float64 { return float64(held()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "refusals_dropped_total",
			Help:      "Refused keys not remembered because the memory was full: inbox missed cannot list them.",
		}, func() float64 { return float64(dropped()) }),
	)
}

// ReconcileReader is what the reconcile collector reads.
type ReconcileReader interface {
	Reconciliation(ctx context.Context, now time.Time) (inbox.Reconciliation, error)
}

// ReconcileCollector reads, at each scrape, the missed keys and the
// expectations by state.
type ReconcileCollector struct {
	store   ReconcileReader
	timeout time.Duration
	now     func() time.Time

	missed, oldest, expectations *prometheus.Desc
}

// NewReconcileCollector returns a collector over s whose reads give up
// after timeout; now is the clock (time.Now when nil).
func NewReconcileCollector(s ReconcileReader, timeout time.Duration, now func() time.Time) *ReconcileCollector {
	if now == nil {
		now = time.Now
	}
	return &ReconcileCollector{store: s, timeout: timeout, now: now,
		missed: prometheus.NewDesc(namespace+"_missed", "Keys refused with 503 and not delivered since (inbox missed).", nil, nil),
		oldest: prometheus.NewDesc(namespace+"_missed_oldest_age_seconds", "Seconds since the oldest missed key was first refused; 0 when none.", nil, nil),
		expectations: prometheus.NewDesc(namespace+"_expectations", "Expected jobs by state: waiting (not yet due), overdue (waiting past due), done, closed.",
			[]string{"state"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *ReconcileCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.missed
	ch <- c.oldest
	ch <- c.expectations
}

// Collect implements prometheus.Collector; when the store cannot be read
// in time these metrics are left out of the scrape.
func (c *ReconcileCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	now := c.now()
	r, err := c.store.Reconciliation(ctx, now)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.missed, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.missed, prometheus.GaugeValue, float64(r.Missed))
	age := 0.0
	if !r.OldestMissed.IsZero() {
		age = max(now.Sub(r.OldestMissed).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age)
	for state, n := range map[string]int64{"waiting": r.Waiting, "overdue": r.Overdue, "done": r.Done, "closed": r.Closed} {
		ch <- prometheus.MustNewConstMetric(c.expectations, prometheus.GaugeValue, float64(n), state)
	}
}
