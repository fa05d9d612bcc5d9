package metrics

import "github.com/prometheus/client_golang/prometheus"

// Replica registers the replica's series (serve --replica), read at each
// scrape: lag, how far in seconds the replica may trail the database
// file, and errors, the syncs that failed.
func Replica(reg prometheus.Registerer, lag func() float64, errors func() int64) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: namespace,
			Name:      "replica_lag_seconds",
			Help:      "How far the replica may trail the database file: every commit older than this is on the replica.",
		}, lag),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "replica_errors_total",
			Help:      "Syncs to the replica that failed (it could not be reached, or refused the write).",
		}, func() float64 { return float64(errors()) }),
	)
}
