// Package health answers a supervisor's or load balancer's probes: whether
// the process is up, and whether it can take deliveries.
package health

import (
	"context"
	"net/http"
	"time"

	"github.com/rs/zerolog"
)

// Pinger is what readiness needs of the store.
type Pinger interface {
	// Ping fails unless the store can take a write now.
	Ping(ctx context.Context) error
}

// Live answers 200 "ok" to every request: the process is up and serving
// HTTP. It never looks at the store, so a supervisor that restarts on a
// failed liveness probe does not restart a process whose disk is full.
func Live() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
}

// Ready answers 200 "ok" when p.Ping succeeds within timeout, and otherwise
// 503 "not ready" with Retry-After, logging why (the answer does not say).
func Ready(p Pinger, timeout time.Duration, log zerolog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := p.Ping(ctx); err != nil {
			log.Warn().Err(err).Msg("not ready")
			w.Header().Set("Retry-After", "5")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("not ready\n"))
			return
		}
		w.Write([]byte("ok\n"))
	})
}
