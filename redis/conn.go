// Package redis adapts Redis as a destination of the dispatcher, two ways:
// a Stream appends each job to a Redis stream (XADD), and a Queue adds
// each job to a BullMQ queue, as BullMQ's own Queue.add does, once per
// row id ever. Either counts a job delivered only once Redis has answered
// the command, and, while Redis cannot be reached, is a dispatch.Gate that
// fails: the dispatcher pauses and spends no attempt.
package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	goredis "github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"inbox/dispatch"
)

// Connection settings. The connection is looked at once at start, bounded
// by firstPing, and then every pingEvery, each bounded by pingTimeout, in
// the background: a Redis that stops answering is found within a few
// seconds even while no row is handed on, and one that is back within a
// second.
const (
	dialTimeout = 2 * time.Second
	firstPing   = 2 * time.Second
	pingEvery   = time.Second
	pingTimeout = 2 * time.Second
)

// ErrUnreachable says Redis cannot be reached now: the dispatcher pauses
// until a ping answers again.
var ErrUnreachable = errors.New("redis unreachable")

// Log field keys.
const (
	keyServer = "server"
	keyTarget = "target"
)

// conn is the connection both destinations share: a go-redis client and
// the background ping that tells whether Redis can be reached.
type conn struct {
	rdb    *goredis.Client
	server string // the URL without its password, for logs
	target string // what it hands jobs to, for logs and State: "stream jobs"
	log    zerolog.Logger

	mu     sync.Mutex
	down   error // why Redis cannot be reached now; nil while it answers
	warned bool  // the current outage has been logged at warn

	stop chan struct{}
	done chan struct{}
}

// dial makes the connection to the Redis at rawURL for target, pings it
// once within firstPing, and starts the background ping. It fails only on
// a URL no server could change; a Redis that cannot be reached does not
// stop it.
func dial(rawURL, target string, log zerolog.Logger) (*conn, error) {
	opts, err := Options(rawURL)
	if err != nil {
		return nil, err
	}
	// go-redis logs to stderr, past inbox's JSON lines, what it also
	// returns: inbox logs that, once.
	goredis.SetLogger(quiet{})
	c := &conn{rdb: goredis.NewClient(opts), server: redact(rawURL), target: target,
		log: log.With().Str(keyTarget, target).Logger(), stop: make(chan struct{}), done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), firstPing)
	defer cancel()
	if err := c.rdb.Ping(ctx).Err(); err != nil {
		c.down, c.warned = unreachable(err), true
		c.log.Warn().Str(keyServer, c.server).Err(c.down).Msg("redis unreachable: starting without it; dispatch is paused, rows wait with no attempt counted, until it answers")
	} else {
		c.log.Info().Str(keyServer, c.server).Msg("redis connected")
	}
	go c.watch()
	return c, nil
}

// Options are the go-redis options of rawURL (redis:// or rediss://, a
// password in its user info, a database number as its path), as inbox
// uses them: no command retried inside one attempt (an attempt that fails
// is counted, and retried by the dispatcher), each bounded by the
// attempt's own timeout. It fails on a URL go-redis cannot read, naming
// it without its password.
func Options(rawURL string) (*goredis.Options, error) {
	if strayAt(rawURL) {
		// go-redis would read the password's tail as a path or an
		// option, and say so, quoting it.
		return nil, fmt.Errorf("redis URL %s: percent-encode any / ? # or %% in the user name or password", redact(rawURL))
	}
	opts, err := goredis.ParseURL(rawURL)
	if err != nil {
		// url.Parse's errors quote the URL, password and all.
		var ue *url.Error
		msg := err.Error()
		if errors.As(err, &ue) {
			msg = "not a URL"
		}
		return nil, fmt.Errorf("redis URL %s: %s: want redis://[:password@]host:port[/db] or rediss://", redact(rawURL), msg)
	}
	opts.MaxRetries = -1
	opts.DialTimeout, opts.DialerRetries = dialTimeout, 1
	opts.ContextTimeoutEnabled = true
	opts.DisableIdentity = true
	return opts, nil
}

// quiet is go-redis's logger, saying nothing.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// redact masks the credentials of a Redis URL, for logs and errors: a
// password, and a user with none, which may be a token. A URL with a stray
// @ (see strayAt) is not shown past its scheme, nor one that cannot be
// read.
func redact(rawURL string) string {
	if strayAt(rawURL) {
		scheme, _, _ := strings.Cut(rawURL, "://")
		return scheme + "://(not shown: an @ past the user info)"
	}
	if u, err := url.Parse(rawURL); err == nil {
		if u.User != nil {
			if _, ok := u.User.Password(); !ok {
				u.User = url.User("xxxxx")
			}
		}
		if q := u.Query(); q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.Redacted()
	}
	return "(not shown: not a URL)"
}

// strayAt reports whether rawURL parses with no user info, yet holds an
// @: a password with a / ? or # not percent-encoded, whose tail url.Parse
// reads as the path, query or fragment, and its head as the host.
func strayAt(rawURL string) bool {
	_, rest, ok := strings.Cut(rawURL, "://")
	if !ok || !strings.Contains(rest, "@") {
		return false
	}
	u, err := url.Parse(rawURL)
	return err == nil && u.User == nil
}

// watch pings Redis every pingEvery until Close, and records and logs
// each change between reachable and not.
func (c *conn) watch() {
	defer close(c.done)
	t := time.NewTicker(pingEvery)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
		err := c.rdb.Ping(ctx).Err()
		cancel()
		if err != nil {
			c.setDown(unreachable(err))
			continue
		}
		c.mu.Lock()
		was := c.down
		c.down, c.warned = nil, false
		c.mu.Unlock()
		if was != nil {
			c.log.Info().Str(keyServer, c.server).Msg("redis answers again: dispatch resumes")
		}
	}
}

// setDown records that Redis cannot be reached, for err; the first of an
// outage is logged at warn, the rest at debug.
func (c *conn) setDown(err error) {
	c.mu.Lock()
	first := !c.warned
	c.down, c.warned = err, true
	c.mu.Unlock()
	ev := c.log.Debug()
	if first {
		ev = c.log.Warn()
	}
	ev.Err(err).Msg("redis unreachable: dispatch is paused, rows wait with no attempt counted, until it answers")
}

// unreachable is err, a failure to reach Redis, as ErrUnreachable.
func unreachable(err error) error {
	return fmt.Errorf("%w: %w", ErrUnreachable, err)
}

// Ready fails with ErrUnreachable while Redis cannot be reached, at once
// and sending nothing: it implements dispatch.Gate, so the dispatcher
// pauses meanwhile.
func (c *conn) Ready() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down != nil {
		return fmt.Errorf("%s: %w", c.target, c.down)
	}
	return nil
}

// State says whether jobs can be handed to Redis now, in a few words and
// no address, for /readyz.
func (c *conn) State(context.Context) (bool, string) {
	if c.Ready() != nil {
		return false, "unreachable: dispatch paused, rows wait with no attempt counted"
	}
	return true, "connected, " + c.target
}

// Collector returns the gauge inbox_redis_connected: 1 while Redis
// answers, else 0.
func (c *conn) Collector() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "inbox_redis_connected",
		Help: "1 while the dispatcher's Redis (a stream or BullMQ destination) answers, else 0 (dispatch to it is paused).",
	}, func() float64 {
		if c.Ready() != nil {
			return 0
		}
		return 1
	})
}

// failed says why a command to Redis failed, err, as the dispatcher takes
// it. Redis out of reach closes the gate at once; a connection that could
// not even be made sent nothing, and gives the attempt back uncounted
// (dispatch.Down); one lost under way may have reached Redis, and counts.
// A server that answers it cannot take writes now (loading, a replica, out
// of memory, a failed save, a script running) is the destination's
// outage, not the row's: dispatch.Down. Any other error is retried.
func (c *conn) failed(what string, err error) error {
	var rerr goredis.Error
	switch {
	case errors.As(err, &rerr) && away(rerr.Error()):
		return dispatch.Down(fmt.Errorf("%s: %w", what, err), 0)
	case errors.As(err, &rerr):
		return fmt.Errorf("%s: %w", what, err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		// The attempt's timeout: the dispatcher says so.
		return fmt.Errorf("%s: %w", what, err)
	}
	c.setDown(unreachable(err))
	var op *net.OpError
	if (errors.As(err, &op) && op.Op == "dial") || errors.Is(err, goredis.ErrPoolTimeout) {
		return dispatch.Down(fmt.Errorf("%s: %w: not sent: %w", what, ErrUnreachable, err), 0)
	}
	return fmt.Errorf("%s: %w: %w", what, ErrUnreachable, err)
}

// away reports whether a Redis error reply says the server cannot take
// writes now, whatever the write.
func away(reply string) bool {
	for _, p := range []string{"LOADING", "READONLY", "MASTERDOWN", "MISCONF", "OOM", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "NOREPLICAS"} {
		if strings.HasPrefix(reply, p+" ") {
			return true
		}
	}
	return false
}

// Close stops the background ping and closes the connection.
func (c *conn) Close() {
	close(c.stop)
	<-c.done
	c.rdb.Close()
}
