package amqp_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"

	"inbox/amqp"
	"inbox/amqp/amqptest"
	"inbox/dispatch"
	"inbox/inbox"
)

// topology is an exchange and a durable queue bound to it with a routing
// key, named for the test alone, deleted after it.
type topology struct {
	exchange, queue, key string
	ch                   *amqp091.Channel
}

// declare declares tp's exchange (direct, durable) and, when bind, its
// queue (durable) bound with its key, on a connection of the test's.
func declare(t *testing.T, u string, bind bool) *topology {
	t.Helper()
	return declareWith(t, u, bind, nil)
}

// declareWith is declare with the queue's arguments.
func declareWith(t *testing.T, u string, bind bool, args amqp091.Table) *topology {
	t.Helper()
	name, ch := amqptest.Declare(t, u, args)
	tp := &topology{exchange: name, queue: name, key: "sume.jobs", ch: ch}
	if bind {
		if err := ch.QueueBind(tp.queue, tp.key, tp.exchange, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	return tp
}

// get takes the next message of tp's queue, failing when there is none.
func (tp *topology) get(t *testing.T) amqp091.Delivery {
	t.Helper()
	d, ok, err := tp.ch.Get(tp.queue, true)
	if err != nil || !ok {
		t.Fatalf("get from %s: ok %v, %v", tp.queue, ok, err)
	}
	return d
}

// count is how many messages tp's queue holds.
func (tp *topology) count(t *testing.T) int {
	t.Helper()
	q, err := tp.ch.QueueDeclarePassive(tp.queue, true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q.Messages
}

func connect(t *testing.T, u string, tp *topology, log zerolog.Logger) *amqp.Publisher {
	t.Helper()
	p, err := amqp.Connect(u, tp.exchange, tp.key, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// waitFor polls cond every 10ms until it holds, failing after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func job(id string, attempt int) inbox.Job {
	return inbox.Job{
		ID: "vibe/" + id, Source: "vibe", Key: id, Event: "run.completed", Attempt: attempt,
		// Bytes exactly as received: not UTF-8, a NUL, no trailing newline.
		Body: []byte("{\"runId\":\"" + id + "\",\"x\":\"\xff\x00\"}"),
	}
}

// TestDeliver publishes jobs and reads them back from a durable queue:
// the body byte for byte, persistent, message_id the row's id, the
// headers the source, event, attempt and key.
func TestDeliver(t *testing.T) {
	t.Parallel()
	u := amqptest.URL(t)
	tp := declare(t, u, true)
	p := connect(t, u, tp, zerolog.Nop())
	if err := p.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.Ready(); err != nil {
		t.Fatalf("ready: %v", err)
	}
	if ok, state := p.State(context.Background()); !ok || state != "connected, exchange "+tp.exchange {
		t.Errorf("state %v %q", ok, state)
	}
	if got := testutil.ToFloat64(p.Collector()); got != 1 {
		t.Errorf("inbox_amqp_connected = %v, want 1", got)
	}
	jobs := []inbox.Job{job("run_1", 1), job("run_2", 3)}
	for _, j := range jobs {
		if err := p.Deliver(context.Background(), j); err != nil {
			t.Fatalf("deliver %s: %v", j.ID, err)
		}
	}
	for _, j := range jobs {
		d := tp.get(t)
		if !bytes.Equal(d.Body, j.Body) {
			t.Errorf("body %q, want %q", d.Body, j.Body)
		}
		if d.MessageId != j.ID || d.DeliveryMode != amqp091.Persistent || d.Type != j.Event {
			t.Errorf("message_id %q delivery_mode %d type %q; want %q 2 %q", d.MessageId, d.DeliveryMode, d.Type, j.ID, j.Event)
		}
		want := amqp091.Table{
			"Inbox-Source": "vibe", "Inbox-Event": "run.completed", "Inbox-Attempt": int64(j.Attempt),
			"Inbox-Key": j.Key, "Idempotency-Key": j.Key, "Inbox-Row-Id": j.ID,
		}
		for k, v := range want {
			if d.Headers[k] != v {
				t.Errorf("header %s = %#v, want %#v", k, d.Headers[k], v)
			}
		}
	}
	// Many at once, over several channels: each confirmed, each stored.
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Go(func() {
			errs <- p.Deliver(context.Background(), job("many_"+string(rune('a'+i%26))+hex.EncodeToString([]byte{byte(i)}), 1))
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := tp.count(t); n != 40 {
		t.Errorf("queue holds %d, want 40", n)
	}
}

// TestQuorumQueue publishes to a quorum queue (replicated, always
// durable): confirmed once stored, and read back.
func TestQuorumQueue(t *testing.T) {
	t.Parallel()
	u := amqptest.URL(t)
	tp := declareWith(t, u, true, amqp091.Table{"x-queue-type": "quorum"})
	p := connect(t, u, tp, zerolog.Nop())
	j := job("run_q", 1)
	if err := p.Deliver(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	if d := tp.get(t); d.MessageId != j.ID || !bytes.Equal(d.Body, j.Body) {
		t.Errorf("read back %q %q", d.MessageId, d.Body)
	}
}

// TestDefaultExchange publishes to the default exchange, where the
// routing key names the queue.
func TestDefaultExchange(t *testing.T) {
	t.Parallel()
	u := amqptest.URL(t)
	tp := declare(t, u, false)
	p, err := amqp.Connect(u, "", tp.queue, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Deliver(context.Background(), job("run_d", 1)); err != nil {
		t.Fatal(err)
	}
	if d := tp.get(t); d.MessageId != "vibe/run_d" {
		t.Errorf("message_id %q", d.MessageId)
	}
	if ok, state := p.State(context.Background()); !ok || state != "connected, default exchange" {
		t.Errorf("state %v %q", ok, state)
	}
}

// TestUnroutable: an exchange no queue is bound to for the routing key
// returns the message; the attempt fails as the destination's outage
// (dispatch.Down: the operator's binding to fix, never the row's to be
// parked for), saying so, and nothing is stored. Once a queue is bound
// the next publish goes through.
func TestUnroutable(t *testing.T) {
	t.Parallel()
	u := amqptest.URL(t)
	tp := declare(t, u, false)
	p := connect(t, u, tp, zerolog.Nop())
	err := p.Deliver(context.Background(), job("run_u", 1))
	if !errors.Is(err, amqp.ErrUnroutable) || !dispatch.IsDown(err) || dispatch.Rejected(err) {
		t.Fatalf("err = %v; want ErrUnroutable, Down, not rejected", err)
	}
	for _, want := range []string{tp.exchange, `routing key "sume.jobs"`, "NO_ROUTE", "bind a durable queue"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if err := p.Ready(); err != nil {
		t.Errorf("ready after unroutable: %v (the breaker holds the rows, not the gate)", err)
	}
	if err := tp.ch.QueueBind(tp.queue, tp.key, tp.exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.Deliver(context.Background(), job("run_u", 2)); err != nil {
		t.Fatal(err)
	}
	if d := tp.get(t); d.Headers["Inbox-Attempt"] != int64(2) {
		t.Errorf("stored %v; want only the second attempt", d.Headers)
	}
	if n := tp.count(t); n != 0 {
		t.Errorf("queue holds %d more", n)
	}
}

// TestNoExchange: an exchange that does not exist pauses the dispatcher
// (Ready fails, saying how to declare it); a publish meanwhile is the
// destination's outage; once declared, it resumes.
func TestNoExchange(t *testing.T) {
	t.Parallel()
	u := amqptest.URL(t)
	tp := declare(t, u, false)
	missing := tp.exchange + "-missing"
	p, err := amqp.Connect(u, missing, tp.key, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Check(context.Background()); !errors.Is(err, amqp.ErrNoExchange) || !strings.Contains(err.Error(), "declare it") {
		t.Fatalf("check: %v", err)
	}
	if err := p.Ready(); !errors.Is(err, amqp.ErrNoExchange) {
		t.Errorf("ready: %v", err)
	}
	if ok, state := p.State(context.Background()); ok || !strings.Contains(state, "no exchange") {
		t.Errorf("state %v %q", ok, state)
	}
	if err := p.Deliver(context.Background(), job("run_x", 1)); !errors.Is(err, amqp.ErrNoExchange) || !dispatch.IsDown(err) {
		t.Errorf("deliver: %v", err)
	}
	if err := tp.ch.ExchangeDeclare(missing, "direct", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	defer tp.ch.ExchangeDelete(missing, false, false)
	if err := tp.ch.QueueBind(tp.queue, tp.key, missing, false, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "ready once declared", func() bool { return p.Ready() == nil })
	if err := p.Deliver(context.Background(), job("run_x", 2)); err != nil {
		t.Fatal(err)
	}
	if n := tp.count(t); n != 1 {
		t.Errorf("queue holds %d, want 1", n)
	}
}

// TestUnreachable: no broker behind the port: Connect returns, Ready and
// State say unreachable, a publish fails at once, given back uncounted
// (dispatch.Down), and no error, state or
// log line names the password.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	var logs syncBuffer
	u := "amqp://inbox:hunter2pw@" + addr + "/"
	p, err := amqp.Connect(u, "jobs", "sume", zerolog.New(&logs))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rerr := p.Ready()
	if !errors.Is(rerr, amqp.ErrUnreachable) {
		t.Errorf("ready: %v", rerr)
	}
	ok, state := p.State(context.Background())
	if ok || !strings.Contains(state, "unreachable") {
		t.Errorf("state %v %q", ok, state)
	}
	derr := p.Deliver(context.Background(), job("run_1", 1))
	if !errors.Is(derr, amqp.ErrUnreachable) || !dispatch.IsDown(derr) {
		t.Errorf("deliver: %v", derr)
	}
	if got := testutil.ToFloat64(p.Collector()); got != 0 {
		t.Errorf("inbox_amqp_connected = %v, want 0", got)
	}
	p.Close()
	if !strings.Contains(logs.String(), "rabbitmq unreachable") || !strings.Contains(logs.String(), addr) {
		t.Errorf("log does not say the broker is unreachable: %s", logs.String())
	}
	for what, text := range map[string]string{"ready": rerr.Error(), "state": state, "deliver": derr.Error(), "log": logs.String()} {
		if strings.Contains(text, "hunter2pw") {
			t.Errorf("%s names the password: %s", what, text)
		}
	}
	if ok, state := p.State(context.Background()); ok || state != "closed" {
		t.Errorf("closed: state %v %q", ok, state)
	}
}

// TestWrongPassword: a broker that refuses the credentials is logged as
// unreachable without the password.
func TestWrongPassword(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(amqptest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("guest", "not-the-hunter2pw")
	var logs syncBuffer
	p, err := amqp.Connect(u.String(), "jobs", "sume", zerolog.New(&logs))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Ready(); !errors.Is(err, amqp.ErrUnreachable) {
		t.Errorf("ready: %v", err)
	}
	p.Close()
	if !strings.Contains(logs.String(), "rabbitmq unreachable") || strings.Contains(logs.String(), "hunter2pw") {
		t.Errorf("log: %s", logs.String())
	}
}

// TestCheckAddress refuses what no broker could change, without the
// password.
func TestCheckAddress(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ url, exchange, key, want string }{
		{"http://u:hunter2pw@127.0.0.1:5672/", "jobs", "k", "amqp URL"},
		{"amqp://", "jobs", "k", "amqp URL"},
		{"127.0.0.1:5672", "jobs", "k", "amqp URL"},
		{"amqp://u:hunter2pw@127.0.0.1:5672/", "", "", "amqp_routing_key names the queue"},
		{"amqp://u:hunter2pw@127.0.0.1:5672/", strings.Repeat("x", 256), "k", "longer than"},
		{"amqp://u:hunter2pw@127.0.0.1:5672/", "jobs", strings.Repeat("x", 256), "longer than"},
		// A / ? or # in the password, not percent-encoded, ends the user
		// info early: url.Parse reads no password, yet there is one.
		{"amqp://u:12#hunter2pw@127.0.0.1:5672/", "jobs", "k", "amqp URL"},
		{"amqp://u:12/hunter2pw@127.0.0.1:5672/", "jobs", "k", "amqp URL"},
		{"amqps://u:12?hunter2pw@127.0.0.1:5671/", "jobs", "k", "amqp URL"},
		// A user with no password may be a token.
		{"http://hunter2pw@127.0.0.1:5672/", "jobs", "k", "amqp URL"},
	} {
		err := amqp.CheckAddress(c.url, c.exchange, c.key)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "hunter2pw") {
			t.Errorf("%q %q: %v; want %q, no password", c.url, c.exchange, err, c.want)
		}
	}
	for _, good := range []string{"amqp://guest:guest@127.0.0.1:5672/", "amqps://u:p@mq.example.com/prod", "amqp://127.0.0.1"} {
		if err := amqp.CheckAddress(good, "jobs", ""); err != nil {
			t.Errorf("%s: %v", good, err)
		}
	}
}

// TestReconnect: the connection cut (a proxy between, closed) pauses
// publishing; once the proxy relays again the publisher reconnects by
// itself and publishes.
func TestReconnect(t *testing.T) {
	t.Parallel()
	u := amqptest.URL(t)
	tp := declare(t, u, true)
	px := amqptest.NewProxy(t, u)
	p := connect(t, px.Through(u), tp, zerolog.Nop())
	if err := p.Deliver(context.Background(), job("run_1", 1)); err != nil {
		t.Fatal(err)
	}
	px.Down()
	waitFor(t, 10*time.Second, "not ready once cut", func() bool { return errors.Is(p.Ready(), amqp.ErrUnreachable) })
	if err := p.Deliver(context.Background(), job("run_2", 1)); !errors.Is(err, amqp.ErrUnreachable) {
		t.Errorf("deliver while cut: %v", err)
	}
	px.Up()
	waitFor(t, 30*time.Second, "ready once back", func() bool { return p.Ready() == nil })
	if err := p.Deliver(context.Background(), job("run_3", 1)); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for tp.count(t) > 0 {
		ids = append(ids, tp.get(t).MessageId)
	}
	if strings.Join(ids, " ") != "vibe/run_1 vibe/run_3" {
		t.Errorf("stored %v; want run_1 and run_3", ids)
	}
}

// syncBuffer is a bytes.Buffer safe for the logger's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
