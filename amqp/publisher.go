// Package amqp adapts RabbitMQ (AMQP 0-9-1) as a destination of the
// dispatcher: it publishes each job to an exchange with a routing key, as a
// persistent message whose message_id is the row's id, and counts a job
// delivered only once the broker has confirmed it (publisher confirms). A
// message no queue takes (mandatory, returned unroutable) is never counted
// delivered.
package amqp

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"

	"inbox/dispatch"
	"inbox/inbox"
)

// Connection settings. The first attempt is made at once, bounded by
// connectTimeout; after that, and after every loss, the connection is
// tried again after firstRetry, doubling up to maxRetry, forever, in the
// background. A broker that stops answering on a connection still open
// is given up after three heartbeats missed (15 seconds), as amqp091-go
// does; RabbitMQ advises against heartbeats under 5 seconds.
const (
	connectTimeout = 5 * time.Second
	closeTimeout   = 2 * time.Second
	heartbeat      = 5 * time.Second
	firstRetry     = 500 * time.Millisecond
	maxRetry       = 15 * time.Second
	// While the exchange is missing it is looked up again every
	// probeEvery, each bounded by connectTimeout, to tell when it is
	// declared.
	probeEvery = time.Second
	// maxIdle bounds the confirm channels kept open between publishes:
	// each carries one publish at a time, so that a returned message and
	// its confirmation are told apart from any other's.
	maxIdle = 64
	// maxNameLen is AMQP's bound on an exchange name or routing key (a
	// short string).
	maxNameLen = 255
)

// ErrUnreachable says the broker cannot be reached now: nothing was sent,
// or the connection was lost before the broker confirmed; the connection
// is being tried again in the background.
var ErrUnreachable = errors.New("rabbitmq unreachable")

// ErrNoExchange says the broker is reached but has no exchange of the
// configured name.
var ErrNoExchange = errors.New("no such exchange")

// ErrUnroutable says the broker returned a message that no queue is bound
// to take (publishing is mandatory), and so stored it nowhere.
var ErrUnroutable = errors.New("returned unroutable by the broker")

// Log field keys.
const (
	keyServer   = "server"
	keyExchange = "exchange"
	keyRouting  = "routing_key"
)

// Publisher publishes jobs to one exchange with one routing key. It is a
// dispatch.Gate: while Ready fails (no connection, the broker blocks
// publishers, the exchange missing) the dispatcher pauses rather than
// spend the rows' attempts.
type Publisher struct {
	url      string // with its password: never logged or shown
	shown    string // url without its password
	exchange string
	key      string
	log      zerolog.Logger
	stop     chan struct{} // closed by Close
	done     chan struct{} // closed when run returns

	mu      sync.Mutex
	sess    *session // nil while not connected
	closed  bool
	noExch  error // the exchange was found missing; nil once found
	warned  bool  // the current outage has been logged at warn
	discard sync.WaitGroup
}

// session is one connection and the confirm channels open on it.
type session struct {
	conn    *amqp091.Connection
	closes  chan *amqp091.Error   // the connection's end
	blocks  chan amqp091.Blocking // the broker blocking publishers, or not
	idle    []*channel
	blocked string // why the broker blocks publishers now; "" when not
}

// channel is a confirm channel carrying one publish at a time.
type channel struct {
	sess    *session
	ch      *amqp091.Channel
	returns chan amqp091.Return
	closes  chan *amqp091.Error
}

// Connect returns a Publisher to the broker at rawURL
// (amqp://user:password@host:5672/vhost, or amqps://) for exchange
// (empty: the default exchange, where routingKey names the queue) and
// routingKey. It fails only on what no broker could change: a URL that is
// not amqp:// or amqps://, or a name AMQP cannot carry. A broker that
// cannot be reached does not stop it: the connection is made in the
// background and remade after every loss, publishes fail at once while
// there is none, and Check, State and Ready say how it stands.
func Connect(rawURL, exchange, routingKey string, log zerolog.Logger) (*Publisher, error) {
	if err := CheckAddress(rawURL, exchange, routingKey); err != nil {
		return nil, err
	}
	p := &Publisher{
		url: rawURL, shown: redact(rawURL), exchange: exchange, key: routingKey,
		log:  log.With().Str(keyExchange, exchange).Str(keyRouting, routingKey).Logger(),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	var s *session
	if conn, err := p.dial(); err != nil {
		p.log.Warn().Str(keyServer, p.shown).Err(err).Msg("rabbitmq unreachable: starting without it; dispatch is paused, rows wait with no attempt counted, until it is reachable")
		p.warned = true
	} else {
		s = p.connected(conn)
	}
	go p.run(s)
	return p, nil
}

// CheckAddress returns what Connect would refuse of rawURL, exchange and
// routingKey, connecting to nothing.
func CheckAddress(rawURL, exchange, routingKey string) error {
	u, err := url.Parse(rawURL)
	if err == nil && u.User == nil && strings.Contains(rawURL, "@") {
		// A / ? or # in the password, not percent-encoded, ends the
		// user info early: its tail is read as the path, query or
		// fragment, its head as the host.
		return fmt.Errorf("amqp URL %s: percent-encode any / ? # or %% in the user name or password", redact(rawURL))
	}
	if err != nil || (u.Scheme != "amqp" && u.Scheme != "amqps") || u.Hostname() == "" {
		return fmt.Errorf("amqp URL %s: want amqp://user:password@host:5672/vhost (or amqps://)", redact(rawURL))
	}
	if _, err := amqp091.ParseURI(rawURL); err != nil {
		return fmt.Errorf("amqp URL %s: want amqp://user:password@host:5672/vhost (or amqps://)", redact(rawURL))
	}
	switch {
	case len(exchange) > maxNameLen:
		return fmt.Errorf("amqp exchange %.40q...: longer than AMQP's %d bytes", exchange, maxNameLen)
	case len(routingKey) > maxNameLen:
		return fmt.Errorf("amqp routing key %.40q...: longer than AMQP's %d bytes", routingKey, maxNameLen)
	case exchange == "" && routingKey == "":
		return errors.New("amqp: with the default exchange (no amqp_exchange), amqp_routing_key names the queue: set it")
	}
	return nil
}

// redact shows rawURL without its password, for logs and errors (a user
// with none, which may be a token, masked too); a URL that parses with no
// user info yet holds an @ (see CheckAddress), or does not parse, shows
// only what follows its last @.
func redact(rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil && (u.User != nil || !strings.Contains(rawURL, "@")) {
		if _, ok := u.User.Password(); u.User != nil && !ok {
			u.User = url.User("xxxxx")
		}
		return u.Redacted()
	}
	if at := strings.LastIndex(rawURL, "@"); at >= 0 {
		return "xxxxx" + rawURL[at:]
	}
	return rawURL
}

// dial makes one connection, within connectTimeout. Its error names the
// server without its password.
func (p *Publisher) dial() (*amqp091.Connection, error) {
	props := amqp091.NewConnectionProperties()
	props.SetClientConnectionName("inbox dispatch")
	conn, err := amqp091.DialConfig(p.url, amqp091.Config{
		Heartbeat:  heartbeat,
		Properties: props,
		Dial:       amqp091.DefaultDial(connectTimeout),
	})
	if err != nil {
		return nil, fmt.Errorf("connect to rabbitmq %s: %w", p.shown, p.scrub(err))
	}
	return conn, nil
}

// scrub returns err with the URL's password masked, should the library
// ever repeat it.
func (p *Publisher) scrub(err error) error {
	u, perr := url.Parse(p.url)
	if perr != nil || u.User == nil {
		return err
	}
	if pw, ok := u.User.Password(); ok && pw != "" && strings.Contains(err.Error(), pw) {
		return errors.New(strings.ReplaceAll(err.Error(), pw, "xxxxx"))
	}
	return err
}

// run keeps a connection up until Close, starting with s (nil: none
// yet): it dials again after every failure or loss, waiting longer each
// time, from firstRetry up to maxRetry.
func (p *Publisher) run(s *session) {
	defer close(p.done)
	wait := firstRetry
	retry := time.NewTimer(0)
	defer retry.Stop()
	for {
		if s == nil {
			retry.Reset(wait)
			select {
			case <-p.stop:
				return
			case <-retry.C:
			}
			conn, err := p.dial()
			if err != nil {
				p.unreachable(err)
				wait = min(wait*2, maxRetry)
				continue
			}
			s = p.connected(conn)
		}
		wait = firstRetry
		if p.serve(s) {
			return
		}
		s = nil
	}
}

// unreachable logs a failed connection attempt: the first of an outage at
// warn, the rest at debug.
func (p *Publisher) unreachable(err error) {
	p.mu.Lock()
	first := !p.warned
	p.warned = true
	p.mu.Unlock()
	ev := p.log.Debug()
	if first {
		ev = p.log.Warn()
	}
	ev.Err(err).Msg("rabbitmq still unreachable")
}

// connected makes conn the one published on, logs it (at info after an
// outage), and looks the exchange up.
func (p *Publisher) connected(conn *amqp091.Connection) *session {
	s := &session{
		conn:   conn,
		closes: conn.NotifyClose(make(chan *amqp091.Error, 1)),
		blocks: conn.NotifyBlocked(make(chan amqp091.Blocking, 1)),
	}
	p.mu.Lock()
	again := p.warned
	p.sess, p.warned = s, false
	p.mu.Unlock()
	ev := p.log.Debug()
	if again {
		ev = p.log.Info()
	}
	ev.Str(keyServer, p.shown).Msg("rabbitmq connected")
	if err := p.lookup(); err != nil && !errors.Is(err, ErrUnreachable) {
		p.log.Error().Err(err).Msg("rabbitmq connected, but publishing will fail: dispatch is paused until the exchange exists")
	}
	return s
}

// serve follows s until its connection is lost (false) or Close is called
// (true): the broker blocking publishers and, while the exchange is
// missing, the exchange looked up again.
func (p *Publisher) serve(s *session) (stopped bool) {
	tick := time.NewTicker(probeEvery)
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			p.setSession(nil)
			_ = s.conn.CloseDeadline(time.Now().Add(closeTimeout))
			return true
		case err := <-s.closes:
			p.setSession(nil)
			p.mu.Lock()
			p.warned = true
			p.mu.Unlock()
			p.log.Warn().Err(err).Msg("rabbitmq disconnected: dispatch is paused, rows wait with no attempt counted, until it is back")
			return false
		case b := <-s.blocks:
			p.mu.Lock()
			s.blocked = ""
			if b.Active {
				s.blocked = b.Reason
			}
			p.mu.Unlock()
			if b.Active {
				p.log.Warn().Str("reason", b.Reason).Msg("rabbitmq blocks publishing (a memory or disk alarm): dispatch is paused until it lifts")
			} else {
				p.log.Info().Msg("rabbitmq publishing unblocked: resuming")
			}
		case <-tick.C:
			p.mu.Lock()
			missing := p.noExch != nil
			p.mu.Unlock()
			if missing && p.lookup() == nil {
				p.log.Info().Msg("rabbitmq exchange found: resuming")
			}
		}
	}
}

func (p *Publisher) setSession(s *session) {
	p.mu.Lock()
	p.sess = s
	p.mu.Unlock()
}

// session returns the current session, or ErrUnreachable.
func (p *Publisher) session() (*session, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sess == nil || p.sess.conn.IsClosed() {
		return nil, ErrUnreachable
	}
	return p.sess, nil
}

// Check looks the exchange up now. It fails with ErrUnreachable while
// there is no connection, and with an error matching ErrNoExchange when
// the broker has no such exchange.
func (p *Publisher) Check(context.Context) error { return p.lookup() }

// lookup declares the exchange passively on a channel of its own (a
// missing one closes the channel), and records whether it exists.
func (p *Publisher) lookup() error {
	s, err := p.session()
	if err != nil {
		return err
	}
	if p.exchange == "" {
		return nil // the default exchange always exists
	}
	ch, err := s.conn.Channel()
	if err != nil {
		return fmt.Errorf("look up exchange %q: %w: %w", p.exchange, ErrUnreachable, err)
	}
	// Only the type of an existing exchange is not checked passively.
	err = ch.ExchangeDeclarePassive(p.exchange, "direct", true, false, false, false, nil)
	var aerr *amqp091.Error
	switch {
	case err == nil:
		_ = ch.Close()
		p.setNoExchange(nil)
		return nil
	case errors.As(err, &aerr) && aerr.Code == amqp091.NotFound:
		err = fmt.Errorf("%w %q on the broker: declare it (durable), and bind a durable queue to it with routing key %q, for example: rabbitmqadmin declare exchange name=%s type=direct durable=true", ErrNoExchange, p.exchange, p.key, p.exchange)
		p.setNoExchange(err)
		return err
	case s.conn.IsClosed():
		return fmt.Errorf("look up exchange %q: %w: %w", p.exchange, ErrUnreachable, err)
	}
	return fmt.Errorf("look up exchange %q: %w", p.exchange, err)
}

func (p *Publisher) setNoExchange(err error) {
	p.mu.Lock()
	p.noExch = err
	p.mu.Unlock()
}

// Ready says whether a publish could succeed now, without sending one: it
// fails with ErrUnreachable while there is no connection, while the
// broker blocks publishers (a memory or disk alarm), and while the
// exchange is missing (looked up again every probeEvery). It returns at
// once. It implements dispatch.Gate: the dispatcher pauses while it fails.
func (p *Publisher) Ready() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.sess == nil || p.sess.conn.IsClosed():
		return fmt.Errorf("publish to exchange %q: %w", p.exchange, ErrUnreachable)
	case p.sess.blocked != "":
		return fmt.Errorf("publish to exchange %q: the broker blocks publishing: %s", p.exchange, p.sess.blocked)
	}
	return p.noExch
}

// State says whether jobs can be published now, and how the connection
// stands in a few words for /readyz (no server address: it may be served
// beside the webhooks). While it is not ok, Ready fails too and the
// dispatcher is paused.
func (p *Publisher) State(context.Context) (bool, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		return false, "closed"
	case p.sess == nil || p.sess.conn.IsClosed():
		return false, "unreachable: dispatch paused, rows wait with no attempt counted"
	case p.sess.blocked != "":
		return false, "connected, but the broker blocks publishing (a memory or disk alarm): dispatch paused"
	case p.noExch != nil:
		return false, fmt.Sprintf("connected, but the broker has no exchange %q: dispatch paused", p.exchange)
	case p.exchange == "":
		return true, "connected, default exchange"
	}
	return true, "connected, exchange " + p.exchange
}

// Collector returns the gauge inbox_amqp_connected: 1 while connected to
// the broker, else 0.
func (p *Publisher) Collector() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "inbox_amqp_connected",
		Help: "1 while the dispatcher is connected to its RabbitMQ broker, else 0 (dispatch is paused).",
	}, func() float64 {
		if _, err := p.session(); err != nil {
			return 0
		}
		return 1
	})
}

// Deliver publishes j, persistent and mandatory, with message_id set to
// the row's id, and returns once the broker has confirmed it. A message
// the broker returns unroutable (no queue bound for the routing key), an
// exchange that does not exist, or a user not allowed to publish to it
// fail with dispatch.Down: the broker's configuration, which an operator
// fixes, never the row's, so the attempt is given back and the rows wait.
// A message above the broker's max_message_size is parked
// too_large_for_destination. A publish that could not be sent, the
// connection gone, fails with dispatch.Down too: no attempt is spent. Any
// other failure (a negative confirmation, the connection lost before the
// confirmation) is retried.
func (p *Publisher) Deliver(ctx context.Context, j inbox.Job) error {
	c, err := p.channel()
	if err != nil {
		err = fmt.Errorf("publish to exchange %q: %w: not sent", p.exchange, err)
		if errors.Is(err, ErrUnreachable) {
			// Lost since the dispatcher found it Ready: nothing was
			// sent, so no attempt is spent.
			return dispatch.Down(err, 0)
		}
		return err
	}
	source, key := j.Origin()
	msg := amqp091.Publishing{
		DeliveryMode: amqp091.Persistent,
		MessageId:    j.ID,
		Type:         j.Event,
		AppId:        "inbox",
		Timestamp:    time.Now(),
		Headers: amqp091.Table{
			dispatch.HeaderSource:         source,
			dispatch.HeaderEvent:          j.Event,
			dispatch.HeaderAttempt:        int64(j.Attempt),
			dispatch.HeaderKey:            key,
			dispatch.HeaderIdempotencyKey: key,
			dispatch.HeaderRowID:          j.ID,
		},
		Body: j.Body,
	}
	dc, err := c.ch.PublishWithDeferredConfirmWithContext(ctx, p.exchange, p.key, true, false, msg)
	if err != nil {
		p.drop(c)
		return p.publishError(c, err)
	}
	select {
	case <-dc.Done():
	case <-ctx.Done():
		// A late confirmation or return on this channel would be taken
		// for the next publish's: it is closed.
		p.drop(c)
		return fmt.Errorf("publish to exchange %q: not confirmed in time: %w", p.exchange, ctx.Err())
	}
	// RabbitMQ sends a message's return before its confirmation, and
	// amqp091-go hands it on before it settles the confirmation.
	select {
	case r, ok := <-c.returns:
		if !ok {
			break // closed with the channel
		}
		p.give(c)
		return dispatch.Down(fmt.Errorf("publish to exchange %q with routing key %q: %w (%d %s): no queue is bound to take it; bind a durable queue to the exchange with that routing key", p.exchange, p.key, ErrUnroutable, r.ReplyCode, r.ReplyText), 0)
	default:
	}
	if dc.Acked() {
		p.give(c)
		return nil
	}
	select {
	case aerr, ok := <-c.closes:
		p.drop(c)
		if ok && aerr != nil {
			return p.closeError(c, aerr)
		}
		return fmt.Errorf("publish to exchange %q: %w: the channel closed before the broker confirmed", p.exchange, ErrUnreachable)
	default:
	}
	p.give(c)
	return fmt.Errorf("publish to exchange %q: the broker refused it (negative confirmation: an internal error, or a queue full that rejects publishes)", p.exchange)
}

// channel returns an idle confirm channel of the current connection, or
// opens one.
func (p *Publisher) channel() (*channel, error) {
	p.mu.Lock()
	s := p.sess
	if s == nil || s.conn.IsClosed() {
		p.mu.Unlock()
		return nil, ErrUnreachable
	}
	for len(s.idle) > 0 {
		c := s.idle[len(s.idle)-1]
		s.idle = s.idle[:len(s.idle)-1]
		if !c.ch.IsClosed() {
			p.mu.Unlock()
			return c, nil
		}
	}
	p.mu.Unlock()
	ch, err := s.conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("%w: open a channel: %w", ErrUnreachable, err)
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, fmt.Errorf("put the channel in confirm mode: %w", err)
	}
	return &channel{
		sess: s, ch: ch,
		returns: ch.NotifyReturn(make(chan amqp091.Return, 1)),
		closes:  ch.NotifyClose(make(chan *amqp091.Error, 1)),
	}, nil
}

// give keeps c for the next publish, unless its connection is gone or
// enough are kept.
func (p *Publisher) give(c *channel) {
	p.mu.Lock()
	keep := p.sess == c.sess && len(c.sess.idle) < maxIdle && !c.ch.IsClosed()
	if keep {
		c.sess.idle = append(c.sess.idle, c)
	}
	p.mu.Unlock()
	if !keep {
		p.drop(c)
	}
}

// drop closes c in the background: closing waits for the broker, which
// may not answer.
func (p *Publisher) drop(c *channel) {
	if c.ch.IsClosed() {
		return
	}
	p.discard.Go(func() { _ = c.ch.Close() })
}

// publishError says why a publish could not be sent on c.
func (p *Publisher) publishError(c *channel, err error) error {
	select {
	case aerr, ok := <-c.closes:
		if ok && aerr != nil {
			return p.closeError(c, aerr)
		}
	default:
	}
	if errors.Is(err, amqp091.ErrClosed) {
		// Closed before the message's last frame was written: the
		// broker stores no part of it.
		return dispatch.Down(fmt.Errorf("publish to exchange %q: %w: not sent: %w", p.exchange, ErrUnreachable, err), 0)
	}
	if c.sess.conn.IsClosed() {
		return fmt.Errorf("publish to exchange %q: %w: %w", p.exchange, ErrUnreachable, err)
	}
	return fmt.Errorf("publish to exchange %q: %w", p.exchange, err)
}

// closeError says why the broker closed c, or its connection, under a
// publish.
func (p *Publisher) closeError(c *channel, aerr *amqp091.Error) error {
	switch {
	case c.sess.conn.IsClosed() || !aerr.Server:
		// Lost while publishing: sent or not, it is counted failed.
		return fmt.Errorf("publish to exchange %q: %w: %w", p.exchange, ErrUnreachable, aerr)
	case aerr.Code == amqp091.NotFound:
		err := fmt.Errorf("publish to exchange %q: %w on the broker (%w): declare it, durable, and bind a durable queue to it with routing key %q", p.exchange, ErrNoExchange, aerr, p.key)
		p.setNoExchange(err)
		return dispatch.Down(err, 0)
	case aerr.Code == amqp091.AccessRefused:
		return dispatch.Down(fmt.Errorf("publish to exchange %q: the broker refuses it (%w): grant the user write permission on the exchange", p.exchange, aerr), 0)
	case aerr.Code == amqp091.PreconditionFailed && strings.Contains(aerr.Reason, "max size"):
		return dispatch.TooLarge(fmt.Errorf("publish to exchange %q: above the broker's max_message_size: it can never be published (%w)", p.exchange, aerr))
	}
	return fmt.Errorf("publish to exchange %q: the broker closed the channel: %w", p.exchange, aerr)
}

// Close closes the connection, stops reconnecting, and waits for the
// channels being closed.
func (p *Publisher) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	close(p.stop)
	<-p.done
	p.discard.Wait()
}
