// Package testport picks loopback ports for servers a test starts later
// than it names them (a broker that comes up after an outage, a server
// restarted on the address the binary was given).
//
// A port taken from a listener on 127.0.0.1:0 and closed is in the
// kernel's ephemeral range, which it also hands to outgoing connections
// and to other :0 listeners: on a busy machine one of those can take the
// port before the server starts, and the server fails to bind. Later
// picks below that range instead.
package testport

import (
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"testing"
)

// The ports Later picks from: below Linux's default ephemeral range
// (32768-60999) and above the well-known services'.
const low, high = 20000, 32768

var (
	mu    sync.Mutex
	given = map[int]bool{}
)

// Later returns a loopback port nothing listens on now, outside the
// ephemeral range, never returned before in this process.
func Later(t testing.TB) int {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	for range 1000 {
		port := low + rand.IntN(high-low)
		if given[port] {
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		ln.Close()
		given[port] = true
		return port
	}
	t.Fatalf("no free port in %d-%d", low, high-1)
	return 0
}

// Addr is Later as a host:port on 127.0.0.1.
func Addr(t testing.TB) string {
	t.Helper()
	return "127.0.0.1:" + strconv.Itoa(Later(t))
}
