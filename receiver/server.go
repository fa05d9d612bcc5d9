package receiver

import (
	"context"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"time"

	"github.com/rs/zerolog"
)

// Limits bound what one connection may take. The provider gives each
// attempt 10 s, so a request that cannot be read and answered well inside
// that is cut off rather than held.
type Limits struct {
	// ReadHeaderTimeout is how long a client has to send the request line
	// and headers; a slow or silent client is disconnected after it.
	ReadHeaderTimeout time.Duration
	// ReadTimeout is how long a client has to send the whole request, body
	// included: a body that stalls, or is shorter than its Content-Length,
	// is given up and nothing of it is stored.
	ReadTimeout time.Duration
	// WriteTimeout bounds the time from the end of the headers to the end
	// of the answer.
	WriteTimeout time.Duration
	// IdleTimeout is how long a kept-alive connection may wait for its next
	// request.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds the request line and headers; above it the
	// answer is 431. (net/http allows 4096 bytes more than its own
	// MaxHeaderBytes; Serve takes them off.)
	MaxHeaderBytes int
	// ShutdownTimeout bounds how long requests in flight get to finish
	// after the context is done.
	ShutdownTimeout time.Duration
}

// headerSlack is what net/http reads beyond http.Server.MaxHeaderBytes.
const headerSlack = 4096

// DefaultLimits returns the limits serve uses unless told otherwise.
func DefaultLimits() Limits {
	return Limits{
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       8 * time.Second,
		WriteTimeout:      9 * time.Second,
		IdleTimeout:       5 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ShutdownTimeout:   15 * time.Second,
	}
}

// Endpoint is one listener and what answers on it.
type Endpoint struct {
	Name     string // for the log: "webhooks", "admin"
	Listener net.Listener
	Handler  http.Handler
}

// Serve answers on every endpoint under lim until ctx is done, then stops
// accepting on all of them, lets requests in flight finish (up to
// lim.ShutdownTimeout) and returns nil. If one endpoint fails, the others
// are shut down the same way and its error is returned.
func Serve(ctx context.Context, lim Limits, log zerolog.Logger, endpoints ...Endpoint) error {
	if len(endpoints) == 0 {
		return errors.New("serve: no endpoint")
	}
	errc := make(chan error, len(endpoints))
	servers := make([]*http.Server, len(endpoints))
	for i, ep := range endpoints {
		srv := &http.Server{
			Handler:           ep.Handler,
			ReadHeaderTimeout: lim.ReadHeaderTimeout,
			ReadTimeout:       lim.ReadTimeout,
			WriteTimeout:      lim.WriteTimeout,
			IdleTimeout:       lim.IdleTimeout,
			MaxHeaderBytes:    max(lim.MaxHeaderBytes-headerSlack, 1),
			// Accept errors and handler panics; zerolog.Logger is a Writer.
			ErrorLog: stdlog.New(log.With().Str(keyServes, ep.Name).Logger(), "", 0),
		}
		servers[i] = srv
		go func() {
			err := srv.Serve(ep.Listener)
			if !errors.Is(err, http.ErrServerClosed) {
				err = fmt.Errorf("serve %s on %s: %w", ep.Name, ep.Listener.Addr(), err)
			}
			errc <- err
		}()
		log.Info().Str(keyAddr, ep.Listener.Addr().String()).Str(keyServes, ep.Name).Msg("listening")
	}

	pending := len(servers)
	var errs []error
	select {
	case err := <-errc:
		pending--
		errs = append(errs, err)
	case <-ctx.Done():
	}
	log.Info().Msg("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), lim.ShutdownTimeout)
	defer cancel()
	// In order: the admin endpoint, listed last, still answers probes and
	// scrapes while the webhooks drain.
	for _, srv := range servers {
		if err := srv.Shutdown(sctx); err != nil {
			errs = append(errs, fmt.Errorf("shut down: %w", err))
		}
	}
	for range pending {
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
