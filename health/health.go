// Package health answers a supervisor's or load balancer's probes: whether
// the process is up, and whether it can take deliveries.
package health

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// Prober is what readiness needs of the store.
type Prober interface {
	// Probe fails unless the store can commit now a write like a delivery
	// of size bytes and the dispatcher's claim (see inbox.Store).
	Probe(ctx context.Context, size int) error
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

// Dependency is a party the process hands work to, shown on /readyz
// beside the store.
type Dependency struct {
	// Name labels its line in the answer: "<name>: <detail>".
	Name string
	// State says, within ctx, whether it takes work now, and how it stands
	// in a few words; no address or secret (the answer may be public).
	State func(ctx context.Context) (ok bool, detail string)
	// Gates makes readiness fail while it is not ok. Without it the
	// dependency is only reported: serve's readiness is about taking
	// webhooks, which never wait on the hand-off.
	Gates bool
}

// Ready answers 200 "ok" when the store's probe commits within timeout and
// every gating dependency is ok, and otherwise 503 "not ready" with
// Retry-After, logging why. The probe writes what commits says it must:
// after a real commit failed, as much as its largest delivery (see
// Commits); commits may be nil, for a store no one else writes through. A
// line per dependency follows, saying how it stands; the store's failure
// itself is never described in the answer.
func Ready(p Prober, commits *Commits, timeout time.Duration, log zerolog.Logger, deps ...Dependency) http.Handler {
	return ReadyWith(p, commits, timeout, log, func() []Dependency { return deps })
}

// ReadyWith is Ready with the dependencies deps returns at each probe: a
// reload changes them.
func ReadyWith(p Prober, commits *Commits, timeout time.Duration, log zerolog.Logger, deps func() []Dependency) http.Handler {
	if commits == nil {
		commits = &Commits{}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		ready := true
		size, failed, seq := commits.doubt()
		if err := p.Probe(ctx, size); err != nil {
			ev := log.Warn().Err(err)
			if failed != nil {
				ev = ev.AnErr("commit_error", failed).Int("probe_bytes", size)
			}
			ev.Msg("not ready")
			ready = false
		} else if err := commits.probed(seq); err != nil {
			log.Warn().AnErr("commit_error", err).Msg("not ready: a commit failed while the probe ran, or the dispatcher's settlements still fail")
			ready = false
		}
		var lines strings.Builder
		for _, d := range deps() {
			ok, detail := d.State(ctx)
			fmt.Fprintf(&lines, "%s: %s\n", d.Name, detail)
			if !ok && d.Gates {
				log.Warn().Str("dependency", d.Name).Str("state", detail).Msg("not ready")
				ready = false
			}
		}
		if !ready {
			w.Header().Set("Retry-After", "5")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "not ready\n"+lines.String())
			return
		}
		io.WriteString(w, "ok\n"+lines.String())
	})
}
