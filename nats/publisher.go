// Package nats adapts NATS JetStream as a destination of the dispatcher:
// it publishes each job to a subject a stream covers, with the job id as
// the message id, and counts a job delivered only once the stream has
// acknowledged it.
package nats

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"inbox/dispatch"
	"inbox/inbox"
)

// Headers of a published job, besides Nats-Msg-Id (the row id, unique
// across sources, so the stream never drops one source's job as another's
// duplicate).
const (
	HeaderEvent          = "Inbox-Event"     // the event name
	HeaderAttempt        = "Inbox-Attempt"   // the attempt number, from 1
	HeaderSource         = "Inbox-Source"    // the configured source the row came through
	HeaderKey            = "Inbox-Key"       // the provider's own key of the row
	HeaderRowID          = "Inbox-Row-Id"    // the row's id
	HeaderIdempotencyKey = "Idempotency-Key" // the provider's key, as over HTTP
)

// Connection settings. The first attempt is made at once and bounded by
// connectTimeout; after that, and after every disconnection, the
// connection is tried again every reconnectWait, forever, in the
// background. A server that stops answering on a connection still open (a
// stalled process, a link that drops packets) is given up after
// maxPingsOut pings unanswered, one every pingInterval: a few seconds, not
// nats.go's default of minutes, which would start an attempt on every row
// meanwhile.
const (
	connectTimeout = 5 * time.Second
	reconnectWait  = time.Second
	pingInterval   = 2 * time.Second
	maxPingsOut    = 3
	checkTimeout   = 5 * time.Second // a stream lookup after each connect
	// While a publish has found that no stream answers, or none
	// acknowledged in time, the stream is looked up again every
	// probeEvery, each bounded by probeTimeout, to tell when it is back.
	probeEvery   = time.Second
	probeTimeout = 2 * time.Second
)

// ErrUnreachable says the NATS server cannot be reached now: nothing was
// sent, and the connection is being tried again in the background.
var ErrUnreachable = errors.New("nats server unreachable")

// ErrNoStream says the server is reached but no JetStream stream answers
// for the subject: none covers it, or JetStream is off or not up yet. The
// errors that match it say which.
var ErrNoStream = errors.New("no JetStream stream answers for the subject")

// noStreamError is an error that says in its own words what ErrNoStream
// says.
type noStreamError struct{ err error }

func (e noStreamError) Error() string        { return e.err.Error() }
func (e noStreamError) Unwrap() error        { return e.err }
func (e noStreamError) Is(target error) bool { return target == ErrNoStream }

// Log field keys.
const (
	keyServer  = "server"
	keySubject = "subject"
)

// Publisher publishes jobs to one subject of a JetStream stream. It is a
// dispatch.Gate: while Ready fails the dispatcher pauses rather than spend
// the rows' attempts.
type Publisher struct {
	nc      *natsgo.Conn
	js      jetstream.JetStream
	subject string
	log     zerolog.Logger
	// ready is closed once nc, js and upAtStart are set: nats.go may call
	// the connection handlers before Connect has returned them.
	ready     chan struct{}
	upAtStart bool // the first attempt connected: whoever called Connect checks

	mu     sync.Mutex
	stream string // the stream last found or acked; "" until then
	// doubt says why publishing fails though connected: the last lookup
	// or publish found no stream answering, or a publish was not
	// acknowledged in time. nil once a lookup or a publish succeeds.
	doubt    error
	probing  bool      // a lookup started by Ready is under way
	probedAt time.Time // when the last one ended
	closed   bool      // Close was called: no lookup starts
	probes   sync.WaitGroup
	warned   bool // the current outage has been logged at warn
}

// Connect returns a Publisher to the NATS server(s) at rawURL (several
// comma-separated; credentials in the URL, nats://user:password@host:4222)
// for subject. It fails only on what no server could change: a subject that
// is not literal, or a URL that is not nats://, tls://, ws:// or wss://.
// A server that cannot be reached does not stop it: the connection is made
// in the background and remade after every loss, publishes fail at once
// while there is none, and Check, State and Ready say how it stands.
// Nothing is ever buffered for a later connection, so a publish counted
// failed never reaches the stream afterwards.
func Connect(rawURL, subject string, log zerolog.Logger) (*Publisher, error) {
	if err := CheckAddress(rawURL, subject); err != nil {
		return nil, err
	}
	p := &Publisher{subject: subject, log: log.With().Str(keySubject, subject).Logger(), ready: make(chan struct{})}
	defer close(p.ready)
	nc, err := natsgo.Connect(rawURL,
		natsgo.Name("inbox dispatch"),
		natsgo.Timeout(connectTimeout),
		// Start while the server is down, and keep trying for as long as
		// it is: webhooks are taken meanwhile, the rows wait.
		natsgo.RetryOnFailedConnect(true),
		natsgo.MaxReconnects(-1),
		natsgo.ReconnectWait(reconnectWait),
		natsgo.PingInterval(pingInterval),
		natsgo.MaxPingsOutstanding(maxPingsOut),
		// No reconnect buffer: a publish made while disconnected fails at
		// once instead of being sent on reconnection, after the dispatcher
		// has counted it failed and outside the stream's duplicate window.
		natsgo.ReconnectBufSize(-1),
		natsgo.ConnectHandler(p.firstConnected),
		natsgo.ReconnectHandler(p.connected),
		natsgo.DisconnectErrHandler(p.disconnected),
		natsgo.ReconnectErrHandler(p.reconnectFailed),
	)
	if err != nil {
		return nil, fmt.Errorf("connect to nats %s: %w", redact(rawURL), err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats: jetstream: %w", err)
	}
	p.nc, p.js, p.upAtStart = nc, js, nc.IsConnected()
	if !p.upAtStart {
		p.log.Warn().Str(keyServer, redact(rawURL)).Msg("nats server unreachable: starting without it; dispatch is paused, rows wait with no attempt counted, until it is reachable")
		p.mu.Lock()
		p.warned = true
		p.mu.Unlock()
	}
	return p, nil
}

// CheckAddress returns what Connect would refuse of rawURL and subject,
// connecting to nothing: a subject that is not literal, or a URL that is
// not nats://, tls://, ws:// or wss://.
func CheckAddress(rawURL, subject string) error {
	if subject == "" || strings.ContainsAny(subject, "*> \t\r\n") {
		return fmt.Errorf("nats subject %q: want a literal subject such as sume.jobs.terminal (no wildcards or spaces)", subject)
	}
	return checkURL(rawURL)
}

// checkURL refuses a server URL no connection could use, showing it
// without its password.
func checkURL(rawURL string) error {
	for one := range strings.SplitSeq(rawURL, ",") {
		one = strings.TrimSpace(one)
		if !strings.Contains(one, "://") {
			one = "nats://" + one // as nats.go reads a bare host:port
		}
		u, err := url.Parse(one)
		if err != nil || u.Hostname() == "" {
			return fmt.Errorf("nats URL %s: want nats://host:port (or tls://, ws://, wss://), several comma-separated", redact(rawURL))
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return fmt.Errorf("nats URL %s: scheme %q: want nats://host:port (or tls://, ws://, wss://)", redact(rawURL), u.Scheme)
		}
	}
	return nil
}

// redact masks the credentials of a comma-separated URL list, for logs
// and errors: a password, and a user with none, which NATS takes for a
// token (nats://TOKEN@host), and which url.URL.Redacted, like nats.go's
// ConnectedUrlRedacted, leaves as it is.
func redact(rawURL string) string {
	parts := strings.Split(rawURL, ",")
	for i, one := range parts {
		one = strings.TrimSpace(one)
		if u, err := url.Parse(one); err == nil && u.User != nil {
			if _, ok := u.User.Password(); !ok {
				u.User = url.User("xxxxx")
			}
			parts[i] = u.Redacted()
			continue
		}
		if at := strings.LastIndex(one, "@"); at >= 0 {
			parts[i] = "xxxxx" + one[at:]
		}
	}
	return strings.Join(parts, ",")
}

// firstConnected runs on nats.go's callback goroutine after the first
// connection. Made by the first attempt, inside Connect, it says nothing:
// its caller checks the stream and says how it went, on one line.
func (p *Publisher) firstConnected(nc *natsgo.Conn) {
	<-p.ready
	if p.upAtStart {
		p.log.Debug().Str(keyServer, redact(nc.ConnectedUrl())).Msg("nats connected")
		return
	}
	p.connected(nc)
}

// connected runs on nats.go's callback goroutine after every later connection:
// it logs, and looks the stream up again (JetStream's answer arrives on
// another goroutine, so this does not wait on itself).
func (p *Publisher) connected(nc *natsgo.Conn) {
	<-p.ready
	if p.nc == nil {
		return // Connect failed after all
	}
	p.mu.Lock()
	p.warned = false
	p.mu.Unlock()
	p.log.Info().Str(keyServer, redact(nc.ConnectedUrl())).Msg("nats connected")
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	if err := p.Check(ctx); err != nil && !errors.Is(err, ErrUnreachable) {
		p.log.Error().Err(err).Msg("nats connected, but publishing will fail")
	}
}

// disconnected logs a lost connection; a nil error is our own Close.
func (p *Publisher) disconnected(_ *natsgo.Conn, err error) {
	if err == nil {
		return
	}
	<-p.ready
	p.mu.Lock()
	p.warned = true
	p.mu.Unlock()
	p.log.Warn().Err(err).Msg("nats disconnected: dispatch is paused, rows wait with no attempt counted, until it is back")
}

// reconnectFailed logs the first failed attempt of an outage at warn, the
// rest (one a second) at debug.
func (p *Publisher) reconnectFailed(_ *natsgo.Conn, err error) {
	p.mu.Lock()
	first := !p.warned
	p.warned = true
	p.mu.Unlock()
	ev := p.log.Debug()
	if first {
		ev = p.log.Warn()
	}
	ev.Err(err).Msg("nats still unreachable")
}

// Check looks up the stream that covers the subject now. It fails with
// ErrUnreachable while there is no connection, and otherwise when JetStream
// is not enabled or no stream covers the subject, saying which (both wrap
// ErrNoStream).
func (p *Publisher) Check(ctx context.Context) error {
	stream, err := p.lookup(ctx)
	if err == nil {
		p.setStream(stream)
	}
	return err
}

// lookup finds the stream that covers the subject, as Check says, and
// records only that none does.
func (p *Publisher) lookup(ctx context.Context) (string, error) {
	if !p.nc.IsConnected() {
		return "", ErrUnreachable
	}
	stream, err := p.js.StreamNameBySubject(ctx, p.subject)
	switch {
	case err == nil:
		return stream, nil
	case errors.Is(err, jetstream.ErrStreamNotFound):
		err = noStreamError{fmt.Errorf("no JetStream stream covers subject %q: create one first, for example: nats stream add JOBS --subjects '%s' --dupe-window 2m", p.subject, p.subject)}
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, natsgo.ErrNoResponders):
		err = noStreamError{fmt.Errorf("JetStream is not enabled on the nats server (start it with -js): %w", err)}
	case !p.nc.IsConnected():
		return "", ErrUnreachable
	default:
		return "", fmt.Errorf("find the stream for subject %q: %w", p.subject, err)
	}
	p.setDoubt(err)
	return "", err
}

func (p *Publisher) setStream(stream string) {
	p.mu.Lock()
	p.stream, p.doubt = stream, nil
	p.mu.Unlock()
}

// setDoubt records why publishing fails though connected.
func (p *Publisher) setDoubt(err error) {
	p.mu.Lock()
	p.doubt = err
	p.mu.Unlock()
}

// probe looks the stream up within ctx, and then asks the stream itself
// (its leader, in a cluster) for its state: a server that answers lookups
// for a stream that cannot take messages does not end the doubt.
func (p *Publisher) probe(ctx context.Context) error {
	stream, err := p.lookup(ctx)
	if err != nil {
		return err
	}
	if _, err := p.js.Stream(ctx, stream); err != nil {
		if !p.nc.IsConnected() {
			return ErrUnreachable
		}
		err = fmt.Errorf("stream %s does not answer: %w", stream, err)
		p.setDoubt(err)
		return err
	}
	p.setStream(stream)
	return nil
}

// Ready says whether a publish could succeed now, without sending one: it
// fails with ErrUnreachable while there is no connection, and with the
// last error that said the stream does not answer (none covers the
// subject, JetStream is off, or a publish was not acknowledged in time)
// until a lookup finds it again. Those lookups run in the background, one
// every probeEvery at most, so Ready returns at once. It implements
// dispatch.Gate: the dispatcher pauses while it fails.
func (p *Publisher) Ready() error {
	if !p.nc.IsConnected() {
		return fmt.Errorf("publish to %s: %w", p.subject, ErrUnreachable)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	doubt := p.doubt
	if doubt == nil {
		return nil
	}
	if !p.probing && !p.closed && time.Since(p.probedAt) >= probeEvery {
		p.probing = true
		p.probes.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
			defer cancel()
			err := p.probe(ctx)
			p.mu.Lock()
			p.probing, p.probedAt = false, time.Now()
			p.mu.Unlock()
			if err == nil {
				p.log.Info().Str("stream", p.Stream()).Msg("nats stream answers again")
			}
		})
	}
	return doubt
}

// Stream returns the name of the stream that covers the subject, as last
// found or acknowledged; "" before either.
func (p *Publisher) Stream() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stream
}

// State says whether jobs can be published now, and how the connection
// stands in a few words for /readyz (no server address: it may be served
// beside the webhooks). While connected with the stream in doubt it looks
// the stream up again within ctx, so a stream created since shows at once.
// While it is not ok, Ready fails too and the dispatcher is paused.
func (p *Publisher) State(ctx context.Context) (bool, string) {
	if !p.nc.IsConnected() {
		if p.nc.IsClosed() {
			return false, "closed"
		}
		return false, "unreachable: dispatch paused, rows wait with no attempt counted"
	}
	p.mu.Lock()
	doubt := p.doubt
	p.mu.Unlock()
	if doubt != nil {
		switch err := p.probe(ctx); {
		case err == nil:
		case errors.Is(err, ErrNoStream):
			return false, fmt.Sprintf("connected, but no JetStream stream answers for subject %s: dispatch paused", p.subject)
		case errors.Is(err, ErrUnreachable):
			return false, "unreachable: dispatch paused, rows wait with no attempt counted"
		default:
			return false, fmt.Sprintf("connected, but the stream for subject %s does not answer: dispatch paused", p.subject)
		}
	}
	if s := p.Stream(); s != "" {
		return true, "connected, stream " + s
	}
	return true, "connected"
}

// Collector returns the gauge inbox_nats_connected: 1 while connected to a
// NATS server, else 0.
func (p *Publisher) Collector() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "inbox_nats_connected",
		Help: "1 while the dispatcher is connected to its NATS server, else 0 (publishes fail and are retried).",
	}, func() float64 {
		if p.nc.IsConnected() {
			return 1
		}
		return 0
	})
}

// Publish publishes j with Nats-Msg-Id set to the job id and returns the
// stream's acknowledgement. When the stream already holds a message with
// that id inside its duplicate window, it drops this one and the ack says
// Duplicate; that is success too. Without a connection it fails at once
// with ErrUnreachable, having sent nothing.
func (p *Publisher) Publish(ctx context.Context, j inbox.Job) (*jetstream.PubAck, error) {
	if !p.nc.IsConnected() {
		return nil, fmt.Errorf("publish to %s: %w: not sent", p.subject, ErrUnreachable)
	}
	msg := natsgo.NewMsg(p.subject)
	msg.Data = j.Body
	source, key := j.Origin()
	msg.Header.Set(HeaderEvent, j.Event)
	msg.Header.Set(HeaderAttempt, strconv.Itoa(j.Attempt))
	msg.Header.Set(HeaderSource, source)
	msg.Header.Set(HeaderKey, key)
	msg.Header.Set(HeaderIdempotencyKey, key)
	msg.Header.Set(HeaderRowID, j.ID)
	msg.Header.Set(jetstream.MsgIDHeader, j.ID) // as WithMsgID sets it: its bytes count
	if size, most := int64(msg.Size()-len(msg.Subject)-len(msg.Reply)), p.nc.MaxPayload(); most > 0 && size > most {
		return nil, tooLarge(p.subject, size, most)
	}
	ack, err := p.js.PublishMsg(ctx, msg, jetstream.WithMsgID(j.ID))
	if err != nil {
		return nil, p.publishError(err)
	}
	p.setStream(ack.Stream)
	return ack, nil
}

// tooLarge is the error of a message of size bytes, its headers with its
// body, that the server, taking at most most, can never take: the row is
// parked too_large_for_destination at once (dispatch.TooLarge).
func tooLarge(subject string, size, most int64) error {
	return dispatch.TooLarge(fmt.Errorf("publish to %s: %w: the message is %d bytes with its headers, above the server's max_payload of %d: it can never be published", subject, natsgo.ErrMaxPayload, size, most))
}

// MaxPayload is the largest message, body and headers, the server
// connected to takes (its max_payload), or 0 before any connection.
func (p *Publisher) MaxPayload() int64 { return p.nc.MaxPayload() }

// MaxMsgSize is the largest message the stream Check found stores (its
// max_msg_size), or 0 when it sets none, none was found, or it cannot be
// read within ctx.
func (p *Publisher) MaxMsgSize(ctx context.Context) int64 {
	name := p.Stream()
	if name == "" {
		return 0
	}
	st, err := p.js.Stream(ctx, name)
	if err != nil {
		return 0
	}
	return int64(max(st.CachedInfo().Config.MaxMsgSize, 0))
}

// publishError says why a publish failed, in the terms of Check. A failure
// that says the stream does not answer, rather than anything about this
// message, puts the stream in doubt: Ready fails until a lookup finds it.
func (p *Publisher) publishError(err error) error {
	switch {
	case errors.Is(err, natsgo.ErrMaxPayload):
		// Refused before it was sent: a server reconnected to takes less.
		return dispatch.TooLarge(fmt.Errorf("publish to %s: %w: above the server's max_payload of %d: it can never be published", p.subject, err, p.nc.MaxPayload()))
	case errors.Is(err, jetstream.ErrStreamMessageExceedsMaximum):
		// The stream's own max_msg_size is below the message.
		return dispatch.TooLarge(fmt.Errorf("publish to %s: above the stream's max_msg_size: it can never be stored: %w", p.subject, err))
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		err = noStreamError{fmt.Errorf("publish to %s: no JetStream stream answered (none covers the subject, or JetStream is not up yet): %w", p.subject, err)}
		p.setDoubt(err)
		return err
	case !p.nc.IsConnected(), errors.Is(err, natsgo.ErrReconnectBufExceeded):
		// Lost while publishing: sent or not, it is counted failed; it is
		// never sent later.
		return fmt.Errorf("publish to %s: %w: %w", p.subject, ErrUnreachable, err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, natsgo.ErrTimeout):
		// Connected, yet no acknowledgement: the server or the stream has
		// stalled, or is slow; a lookup tells which.
		err = fmt.Errorf("publish to %s: not acknowledged in time: %w", p.subject, err)
		p.setDoubt(err)
		return err
	}
	return fmt.Errorf("publish to %s: %w", p.subject, err)
}

// Deliver publishes j and returns once the stream has acknowledged it.
// Every failure is retried, but a message the server or the stream can
// never take (above the server's max_payload or the stream's
// max_msg_size), whose row is parked too_large_for_destination.
func (p *Publisher) Deliver(ctx context.Context, j inbox.Job) error {
	_, err := p.Publish(ctx, j)
	return err
}

// Close closes the connection, stops reconnecting, and waits for a lookup
// Ready started.
func (p *Publisher) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.nc.Close()
	p.probes.Wait()
}
