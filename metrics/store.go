package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"inbox/inbox"
)

// StoreReader is what the store collector reads.
type StoreReader interface {
	CountByStatus(ctx context.Context) (map[inbox.Status]int64, error)
	ParkedByReason(ctx context.Context, f inbox.Filter) ([]inbox.ReasonCount, error)
	Queue(ctx context.Context, now time.Time) (inbox.Queue, error)
}

// StoreCollector reads the store at each scrape: rows per status, parked
// rows per reason, the age of the oldest parked row, and the queue of new
// rows (depth, in flight, retrying, oldest waiting age), whichever process
// dispatches them.
type StoreCollector struct {
	store   StoreReader
	timeout time.Duration
	now     func() time.Time

	rows, parked, oldest *prometheus.Desc

	depth, inFlight, retrying, oldestWaiting *prometheus.Desc
}

// NewStoreCollector returns a collector over s whose reads give up after
// timeout. now is the clock for ages (time.Now when nil).
func NewStoreCollector(s StoreReader, timeout time.Duration, now func() time.Time) *StoreCollector {
	if now == nil {
		now = time.Now
	}
	return &StoreCollector{
		store:   s,
		timeout: timeout,
		now:     now,
		rows: prometheus.NewDesc(namespace+"_rows", "Rows in the inbox by status.",
			[]string{"status"}, nil),
		parked: prometheus.NewDesc(namespace+"_parked_rows", "Parked rows by reason.",
			[]string{"reason"}, nil),
		oldest: prometheus.NewDesc(namespace+"_oldest_parked_age_seconds",
			"Seconds since the oldest parked row was received; 0 when none is parked.", nil, nil),
		depth:         prometheus.NewDesc(namespace+"_queue_depth", "New rows: stored and not yet taken by the application.", nil, nil),
		inFlight:      prometheus.NewDesc(namespace+"_queue_in_flight", "New rows a dispatcher holds a running lease on.", nil, nil),
		retrying:      prometheus.NewDesc(namespace+"_queue_retrying", "New rows that failed at least once and wait for their next attempt.", nil, nil),
		oldestWaiting: prometheus.NewDesc(namespace+"_queue_oldest_age_seconds", "How long the oldest new row has waited since it was received; 0 when none.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *StoreCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.rows, c.parked, c.oldest, c.depth, c.inFlight, c.retrying, c.oldestWaiting} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. When the store cannot be read in
// time it reports the error, which leaves these metrics out of the scrape.
func (c *StoreCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	counts, err := c.store.CountByStatus(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.rows, err)
		return
	}
	groups, err := c.store.ParkedByReason(ctx, inbox.Filter{})
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.parked, err)
		return
	}
	for _, st := range inbox.Statuses() {
		ch <- prometheus.MustNewConstMetric(c.rows, prometheus.GaugeValue, float64(counts[st]), string(st))
	}
	byReason := map[inbox.Reason]int64{}
	var oldest time.Time
	for _, g := range groups {
		byReason[g.Reason] = g.Count
		if oldest.IsZero() || g.Oldest.Before(oldest) {
			oldest = g.Oldest
		}
	}
	for _, r := range inbox.Reasons() {
		ch <- prometheus.MustNewConstMetric(c.parked, prometheus.GaugeValue, float64(byReason[r]), string(r))
	}
	age := 0.0
	if !oldest.IsZero() {
		age = max(c.now().Sub(oldest).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age)

	now := c.now()
	q, err := c.store.Queue(ctx, now)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.depth, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(q.Depth))
	ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(q.InFlight))
	ch <- prometheus.MustNewConstMetric(c.retrying, prometheus.GaugeValue, float64(q.Retrying))
	ch <- prometheus.MustNewConstMetric(c.oldestWaiting, prometheus.GaugeValue, q.Age(now).Seconds())
}
