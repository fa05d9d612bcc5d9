// Package natstest runs the real nats-server's code in-process for a
// test, where a test needs a server of its own (to stop, restart or
// configure) rather than the machine's.
package natstest

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Run starts nats-server with the options o and waits until it takes
// connections; it is shut down when the test ends.
func Run(t testing.TB, o *server.Options) *server.Server {
	t.Helper()
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}
