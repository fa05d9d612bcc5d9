package receiver

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/rs/zerolog"
)

// Server timeouts. The provider gives each attempt 10 s; a request that
// cannot be read and answered well inside that is cut off.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 8 * time.Second
	writeTimeout      = 9 * time.Second
	idleTimeout       = 60 * time.Second
	maxHeaderBytes    = 64 << 10
	// shutdownTimeout bounds how long in-flight requests get to finish.
	shutdownTimeout = 15 * time.Second
)

// Serve answers on ln with h until ctx is done, then stops accepting, lets
// in-flight requests finish (up to shutdownTimeout) and returns. It returns
// nil after a clean shutdown.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, log zerolog.Logger) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info().Str("addr", ln.Addr().String()).Msg("listening")

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info().Msg("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}
