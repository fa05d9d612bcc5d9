package receiver

import (
	"context"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"sync"
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
	// is given up and nothing of it is stored. (A stalling body is given up
	// much sooner, after the handler's Config.BodyTimeout.)
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
			Handler: ep.Handler,
			// Handlers find each request's connection, to pace its body.
			ConnContext:       withConn,
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
			err := srv.Serve(deadlineListener{ep.Listener})
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

// deadlineListener hands out connections that remember their read
// deadline.
type deadlineListener struct{ net.Listener }

// Accept wraps the next connection in a deadlineConn.
func (l deadlineListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &deadlineConn{Conn: c}, nil
}

// deadlineConn is a connection that remembers the read deadline last set
// on it. net/http sets the deadline of the whole request (ReadTimeout from
// its first byte) before it calls the handler; the handler reads it here,
// so that pacing a body tightens that deadline and never extends it, and
// gives it back once the body is in.
type deadlineConn struct {
	net.Conn
	mu   sync.Mutex
	read time.Time
}

func (c *deadlineConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.read = t
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

func (c *deadlineConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.read = t
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

// readDeadline is the read deadline last set; zero: none.
func (c *deadlineConn) readDeadline() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.read
}

// CloseWrite half-closes a TCP connection, as net/http does before closing
// one whose request it did not read whole, so the client reads the answer
// rather than a reset.
func (c *deadlineConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

type connKey struct{}

// withConn is http.Server's ConnContext: it keeps a deadlineConn in the
// context of its requests.
func withConn(ctx context.Context, c net.Conn) context.Context {
	if dc, ok := c.(*deadlineConn); ok {
		return context.WithValue(ctx, connKey{}, dc)
	}
	return ctx
}

// requestDeadline returns the read deadline net/http set for r's whole
// request, and ok false when r did not come through Serve (then it is not
// known).
func requestDeadline(r *http.Request) (time.Time, bool) {
	dc, ok := r.Context().Value(connKey{}).(*deadlineConn)
	if !ok {
		return time.Time{}, false
	}
	return dc.readDeadline(), true
}
