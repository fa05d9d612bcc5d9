// Package metrics says how the inbox is doing in the Prometheus text
// format: what became of each delivery, how long requests and commits take,
// and what the store holds. Everything registers on the registry it is
// given; nothing here is global.
package metrics

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"inbox/inbox"
)

const namespace = "inbox"

// Metrics counts deliveries and commits. Its methods fit the hooks of
// receiver.Config (OnAnswer, through Answered) and sqlite.Options (OnCommit).
type Metrics struct {
	deliveries   *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	batchSize    prometheus.Histogram
	commitTime   prometheus.Histogram
	commitErrors prometheus.Counter
	skew         *prometheus.HistogramVec
}

// New registers the delivery and commit metrics on reg. It panics if reg
// already holds metrics of the same names, a wiring mistake.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "deliveries_total",
			Help:      "Requests on a source's webhook path by outcome: stored, revived, duplicate, ignored, parked (reason: why), rejected (reason: the check that failed), store_error, overloaded.",
		}, []string{"source", "outcome", "reason"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace,
			Name:      "request_duration_seconds",
			Help:      "Time from the start of handling a webhook request to its answer, by status code.",
			Buckets:   []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"code"}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace,
			Name:      "commit_batch_size",
			Help:      "Deliveries carried by each successful group commit.",
			Buckets:   prometheus.ExponentialBuckets(1, 2, 9), // 1 .. 256, the largest batch
		}),
		commitTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace,
			Name:      "commit_duration_seconds",
			Help:      "Time each group commit took, fsync included, failed ones too.",
			Buckets:   []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
		commitErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "commit_errors_total",
			Help:      "Group commits that failed; each of their deliveries was answered 503.",
		}),
	}
	m.skew = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace,
		Name:      "clock_skew_seconds",
		Help:      "Per verified delivery whose scheme signs a timestamp, seconds from that timestamp to its receipt: the delivery's delay plus how far the sender's clock is behind this host's (negative: ahead). Timestamps are whole seconds, so it reads up to a second high.",
		Buckets:   []float64{-300, -120, -60, -30, -10, -5, -2, -1, 0, 1, 2, 5, 10, 30, 60, 120, 300},
	}, []string{"source"})
	reg.MustRegister(m.deliveries, m.duration, m.batchSize, m.commitTime, m.commitErrors, m.skew)
	return m
}

// Answered returns what counts one answered webhook request of source; it
// fits receiver.Config.OnAnswer.
func (m *Metrics) Answered(source string) func(outcome, reason string, status int, took time.Duration) {
	// The series alerts watch with increase() exist from the start, at 0, so
	// that their first increment after a restart is seen.
	for _, outcome := range []string{"store_error", "overloaded"} {
		m.deliveries.WithLabelValues(source, outcome, "")
	}
	var seen answers
	return func(outcome, reason string, status int, took time.Duration) {
		k := answerKey{outcome: outcome, reason: reason, status: status}
		s, ok := seen.get(k)
		if !ok {
			s = answerSeries{
				count:    m.deliveries.WithLabelValues(source, outcome, reason),
				duration: m.duration.WithLabelValues(strconv.Itoa(status)),
			}
			seen.add(k, s)
		}
		s.count.Inc()
		s.duration.Observe(took.Seconds())
	}
}

// maxAnswers bounds the answers whose series Answered keeps at hand; the
// outcomes, reasons and statuses are few, so the bound is never met in
// practice, and past it the series are looked up as before.
const maxAnswers = 256

type answerKey struct {
	outcome, reason string
	status          int
}

type answerSeries struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

// answers keeps the series of the answers seen, so that recording one
// neither hashes its label values nor allocates. Readers never lock: the
// map is replaced whole, with the new answer added, the few times one is
// first seen.
type answers struct {
	mu sync.Mutex // serializes add
	m  atomic.Pointer[map[answerKey]answerSeries]
}

func (a *answers) get(k answerKey) (answerSeries, bool) {
	m := a.m.Load()
	if m == nil {
		return answerSeries{}, false
	}
	s, ok := (*m)[k]
	return s, ok
}

func (a *answers) add(k answerKey, s answerSeries) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var old map[answerKey]answerSeries
	if p := a.m.Load(); p != nil {
		old = *p
	}
	if _, ok := old[k]; ok || len(old) >= maxAnswers {
		return
	}
	m := make(map[answerKey]answerSeries, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[k] = s
	a.m.Store(&m)
}

// Skewed returns what records how far past its signed timestamp a verified
// delivery of source arrived; it fits receiver.Config.OnSkew.
func (m *Metrics) Skewed(source string) func(skew time.Duration) {
	h := m.skew.WithLabelValues(source) // exists from the start, empty
	return func(skew time.Duration) { h.Observe(skew.Seconds()) }
}

// Committed records one group commit; it fits sqlite.Options.OnCommit.
func (m *Metrics) Committed(c inbox.Commit) {
	m.commitTime.Observe(c.Took.Seconds())
	if c.Err != nil {
		m.commitErrors.Inc()
		return
	}
	m.batchSize.Observe(float64(c.N))
}

// InFlight registers a gauge of the webhook requests being handled, read
// from f at each scrape.
func InFlight(reg prometheus.Registerer, f func() int) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace,
		Name:      "requests_in_flight",
		Help:      "Webhook requests being handled now.",
	}, func() float64 { return float64(f()) }))
}

// Handler serves what g gathers in the Prometheus text format. A collector
// that fails (the store unreadable) is logged and left out; the rest is
// still served.
func Handler(g prometheus.Gatherer, log zerolog.Logger) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorLog:      printer{log},
		ErrorHandling: promhttp.ContinueOnError,
		// Scrapes are few and cheap; more at once means something is wrong.
		MaxRequestsInFlight: 4,
	})
}

// printer logs promhttp's errors through zerolog.
type printer struct{ log zerolog.Logger }

func (p printer) Println(v ...any) { p.log.Warn().Msg(fmt.Sprint(v...)) }
