// Package amqptest gives tests the RabbitMQ every machine of the project
// runs, and a proxy in front of it that a test closes and reopens to cut
// the connection while the broker, shared with other tests, keeps running.
package amqptest

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// URL returns the broker's URL, INBOX_TEST_AMQP_URL or
// amqp://guest:guest@127.0.0.1:5672/, once it answers. Without one the
// test skips, unless INBOX_REQUIRE_RABBITMQ=1 (.ci/run), when it fails.
func URL(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv("INBOX_TEST_AMQP_URL")
	if u == "" {
		u = "amqp://guest:guest@127.0.0.1:5672/"
	}
	conn, err := amqp091.Dial(u)
	if err != nil {
		if os.Getenv("INBOX_REQUIRE_RABBITMQ") == "1" {
			tb.Fatalf("INBOX_REQUIRE_RABBITMQ=1 but no RabbitMQ answers: %v", err)
		}
		tb.Skipf("no RabbitMQ answers (INBOX_REQUIRE_RABBITMQ=1 fails instead): %v", err)
	}
	conn.Close()
	return u
}

// Proxy relays connections from a loopback port to the broker: Down
// closes every connection and refuses new ones, Up relays again.
type Proxy struct {
	tb     testing.TB
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
}

// NewProxy starts a Proxy to brokerURL's host, closed when the test ends.
func NewProxy(tb testing.TB, brokerURL string) *Proxy {
	tb.Helper()
	u, err := url.Parse(brokerURL)
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	px := &Proxy{tb: tb, target: u.Host, addr: ln.Addr().String(), ln: ln}
	go px.accept(ln)
	tb.Cleanup(px.Down)
	return px
}

func (px *Proxy) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", px.target)
		if err != nil {
			c.Close()
			continue
		}
		px.mu.Lock()
		px.conns = append(px.conns, c, up)
		px.mu.Unlock()
		go func() { io.Copy(up, c); up.Close() }()
		go func() { io.Copy(c, up); c.Close() }()
	}
}

// Down closes every connection and the listener: new ones are refused.
func (px *Proxy) Down() {
	px.mu.Lock()
	defer px.mu.Unlock()
	if px.ln != nil {
		px.ln.Close()
		px.ln = nil
	}
	for _, c := range px.conns {
		c.Close()
	}
	px.conns = nil
}

// Up listens again on the same port and relays again.
func (px *Proxy) Up() {
	px.tb.Helper()
	ln, err := net.Listen("tcp", px.addr)
	if err != nil {
		px.tb.Fatalf("listen again on %s: %v", px.addr, err)
	}
	px.mu.Lock()
	px.ln = ln
	px.mu.Unlock()
	go px.accept(ln)
}

// Through returns brokerURL with its host replaced by the proxy's.
func (px *Proxy) Through(brokerURL string) string {
	u, _ := url.Parse(brokerURL)
	u.Host = px.addr
	return u.String()
}

// Declare dials the broker at u and declares, for the test alone, a
// durable direct exchange and a durable queue (with args) of one name,
// both deleted when it ends. It returns the name and the channel, whose
// connection closes when the test ends.
func Declare(tb testing.TB, u string, args amqp091.Table) (string, *amqp091.Channel) {
	tb.Helper()
	conn, err := amqp091.Dial(u)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		tb.Fatal(err)
	}
	b := make([]byte, 4)
	rand.Read(b)
	name := "inbox-test-" + strings.ToLower(tb.Name()) + "-" + hex.EncodeToString(b)
	if err := ch.ExchangeDeclare(name, "direct", true, false, false, false, nil); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ch.ExchangeDelete(name, false, false) })
	if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ch.QueueDelete(name, false, false, false) })
	return name, ch
}
