package metrics

import (
	"context"
	"sync"
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

// StoreCollector reports what the store holds: rows per status, parked
// rows per reason, the age of the oldest parked row, and the queue of new
// rows (depth, in flight, retrying, oldest waiting age), whichever process
// dispatches them. Counting a million rows takes most of what a scrape may
// wait, so while Run runs the counts are read in the background, every
// RefreshEvery, and when that read took over an eighth of the scrape's
// timeout a scrape reports the latest (inbox_store_read_age_seconds says
// how old). Otherwise (a quick read, no Run, or a read older than
// staleAfter) a scrape reads the store itself, within its timeout.
type StoreCollector struct {
	store   StoreReader
	timeout time.Duration
	now     func() time.Time

	mu     sync.Mutex
	latest *storeRead // nil until a read

	rows, parked, oldest *prometheus.Desc

	depth, inFlight, retrying, oldestWaiting *prometheus.Desc
	readAge                                  *prometheus.Desc
}

// RefreshEvery is how often Run reads the store, and RefreshTimeout how
// long one of its reads may take.
const (
	RefreshEvery   = 10 * time.Second
	RefreshTimeout = 60 * time.Second
)

// staleAfter is how old a background read may be and still be reported.
const staleAfter = 3 * RefreshEvery

// storeRead is one read of the store.
type storeRead struct {
	at      time.Time
	counts  map[inbox.Status]int64
	groups  []inbox.ReasonCount
	queue   inbox.Queue
	took    time.Duration
	err     error
	errDesc *prometheus.Desc
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
		parked: prometheus.NewDesc(namespace+"_parked_rows", "Parked rows by reason, a row parked by any destination under each reason it was parked with.",
			[]string{"reason"}, nil),
		oldest: prometheus.NewDesc(namespace+"_oldest_parked_age_seconds",
			"Seconds since the oldest parked row was received; 0 when none is parked.", nil, nil),
		depth:         prometheus.NewDesc(namespace+"_queue_depth", "New rows: stored and not yet taken by the application.", nil, nil),
		inFlight:      prometheus.NewDesc(namespace+"_queue_in_flight", "New rows a dispatcher holds a running lease on.", nil, nil),
		retrying:      prometheus.NewDesc(namespace+"_queue_retrying", "New rows that failed at least once and wait for their next attempt.", nil, nil),
		oldestWaiting: prometheus.NewDesc(namespace+"_queue_oldest_age_seconds", "How long the oldest new row has waited since it was received; 0 when none.", nil, nil),
		readAge:       prometheus.NewDesc(namespace+"_store_read_age_seconds", "How old the row counts of this scrape are: 0 when read for it, else since the background read.", nil, nil),
	}
}

// Run reads the store every RefreshEvery until ctx is done, so scrapes
// report the latest read at once. It returns nil when ctx is done.
func (c *StoreCollector) Run(ctx context.Context) error {
	for {
		rctx, cancel := context.WithTimeout(ctx, RefreshTimeout)
		r := c.read(rctx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		c.mu.Lock()
		c.latest = r
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(RefreshEvery):
		}
	}
}

// read reads the store once.
func (c *StoreCollector) read(ctx context.Context) *storeRead {
	start := time.Now()
	r := &storeRead{at: c.now()}
	defer func() { r.took = time.Since(start) }()
	if r.counts, r.err = c.store.CountByStatus(ctx); r.err != nil {
		r.errDesc = c.rows
		return r
	}
	if r.groups, r.err = c.store.ParkedByReason(ctx, inbox.Filter{}); r.err != nil {
		r.errDesc = c.parked
		return r
	}
	if r.queue, r.err = c.store.Queue(ctx, c.now()); r.err != nil {
		r.errDesc = c.depth
	}
	return r
}

// Describe implements prometheus.Collector.
func (c *StoreCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.rows, c.parked, c.oldest, c.depth, c.inFlight, c.retrying, c.oldestWaiting, c.readAge} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. When the store cannot be read in
// time it reports the error, which leaves these metrics out of the scrape.
func (c *StoreCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	r := c.latest
	c.mu.Unlock()
	age := 0.0
	// A read that is quick is made for the scrape, so it is exact; one
	// that takes a good part of the scrape's budget (a large inbox) is the
	// background's.
	if r != nil && r.took > c.timeout/8 && c.now().Sub(r.at) <= staleAfter {
		age = max(c.now().Sub(r.at).Seconds(), 0)
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		defer cancel()
		r = c.read(ctx)
	}
	if r.errDesc == c.rows || r.errDesc == c.parked {
		ch <- prometheus.NewInvalidMetric(r.errDesc, r.err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.readAge, prometheus.GaugeValue, age)
	for _, st := range inbox.Statuses() {
		ch <- prometheus.MustNewConstMetric(c.rows, prometheus.GaugeValue, float64(r.counts[st]), string(st))
	}
	byReason := map[inbox.Reason]int64{}
	var oldest time.Time
	for _, g := range r.groups {
		byReason[g.Reason] = g.Count
		if oldest.IsZero() || g.Oldest.Before(oldest) {
			oldest = g.Oldest
		}
	}
	for _, reason := range inbox.Reasons() {
		ch <- prometheus.MustNewConstMetric(c.parked, prometheus.GaugeValue, float64(byReason[reason]), string(reason))
	}
	oldestAge := 0.0
	if !oldest.IsZero() {
		oldestAge = max(c.now().Sub(oldest).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, oldestAge)

	if r.err != nil {
		ch <- prometheus.NewInvalidMetric(c.depth, r.err)
		return
	}
	q := r.queue
	ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(q.Depth))
	ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(q.InFlight))
	ch <- prometheus.MustNewConstMetric(c.retrying, prometheus.GaugeValue, float64(q.Retrying))
	ch <- prometheus.MustNewConstMetric(c.oldestWaiting, prometheus.GaugeValue, q.Age(c.now()).Seconds())
}
