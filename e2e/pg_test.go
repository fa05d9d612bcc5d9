package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	byteorder "encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgDatabase returns INBOX_TEST_DATABASE_URL, or skips the test (fails it
// with INBOX_REQUIRE_POSTGRES=1) when it is not set.
func pgDatabase(t testing.TB) string {
	t.Helper()
	base := os.Getenv("INBOX_TEST_DATABASE_URL")
	if base == "" {
		if os.Getenv("INBOX_REQUIRE_POSTGRES") == "1" {
			t.Fatal("INBOX_REQUIRE_POSTGRES=1 but INBOX_TEST_DATABASE_URL is not set")
		}
		t.Skip("no PostgreSQL: run with INBOX_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	}
	if u, err := url.Parse(base); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatal("INBOX_TEST_DATABASE_URL is not a postgres:// URL")
	}
	return base
}

// pgSchema makes a new, empty schema in the test database, dropped when
// the test ends, and returns the URL that reaches it: the database's URL
// with options=-csearch_path=<schema>, as the binary, psql and pg_dump all
// take it.
func pgSchema(t testing.TB) string {
	t.Helper()
	base := pgDatabase(t)
	b := make([]byte, 6)
	rand.Read(b)
	schema := "e2e_" + hex.EncodeToString(b)
	pgExec(t, base, `CREATE SCHEMA `+schema)
	t.Cleanup(func() { pgExec(t, base, `DROP SCHEMA `+schema+` CASCADE`) })
	u, _ := url.Parse(base)
	q := u.Query()
	q.Set("options", "-csearch_path="+schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// pgExec runs one statement on a connection of its own.
func pgExec(t testing.TB, dsn, sql string, args ...any) {
	t.Helper()
	conn := pgConnect(t, dsn)
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// pgConnect opens a connection to dsn, closed when the test ends.
func pgConnect(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect to the test database: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// withUser returns dsn with user and password in its user info.
func withUser(dsn, user, password string) string {
	u, _ := url.Parse(dsn)
	u.User = url.UserPassword(user, password)
	return u.String()
}

// pgProxy relays TCP connections from a loopback port to PostgreSQL, and
// can cut them (every connection closed, new ones closed at once, as a
// database that went down), stall them (connections held open, nothing
// relayed, as a network that went away), and restore them.
type pgProxy struct {
	target string
	addr   string
	ln     net.Listener

	mu    sync.Mutex
	mode  string // "relay", "cut" or "stall"
	conns map[net.Conn]bool
	// commitCut, when set, is what a statement of a transaction holds for
	// that transaction's COMMIT to be cut (cutCommitOf); cleared once cut.
	commitCut string
}

func startPGProxy(t testing.TB, dsn string) (*pgProxy, string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	target := u.Host
	if u.Port() == "" {
		target += ":5432"
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pgProxy{target: target, addr: ln.Addr().String(), ln: ln, mode: "relay", conns: map[net.Conn]bool{}}
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.closeAll()
	})
	u.Host = p.addr
	return p, u.String()
}

func (p *pgProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		mode := p.mode
		if mode != "cut" {
			p.conns[c] = true
		}
		p.mu.Unlock()
		switch mode {
		case "cut":
			c.Close()
			continue
		case "stall":
			continue // held open, never answered
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[up] = true
		p.mu.Unlock()
		var swallow atomic.Bool
		go p.relayClient(up, c, &swallow)
		go p.relay(c, up, &swallow)
	}
}

// relay copies the server's src to the client's dst, dropping what it
// reads unless relaying. Once swallow is set (a COMMIT was cut), the
// server's next answer closes both instead.
func (p *pgProxy) relay(dst, src net.Conn, swallow *atomic.Bool) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && swallow.Load() {
			src.Close()
			return
		}
		p.mu.Lock()
		relaying := p.mode == "relay"
		p.mu.Unlock()
		if n > 0 && relaying {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				src.Close()
			}
			return
		}
	}
}

// relayClient copies the client's src to the server's dst message by
// message, dropping what it reads unless relaying. It follows each
// transaction's statements (simple queries, and prepared ones by name), and
// the COMMIT of the first transaction one of whose statements holds
// commitCut is passed to the server (with the rest of its pipeline, when it
// comes in one), which commits, while its answer is dropped and the
// client's connection closed: the client never learns the outcome.
func (p *pgProxy) relayClient(dst, src net.Conn, swallow *atomic.Bool) {
	closeDst := true
	defer func() {
		if closeDst {
			dst.Close()
		}
	}()
	r := bufio.NewReader(src)
	stmts := map[string]string{}
	matched, cutAtSync, startup := false, false, true
	for {
		// The startup message (and an SSL or GSS request before it) has no
		// type byte; every later message has one.
		head := 4
		if !startup {
			head = 5
		}
		msg := make([]byte, head)
		if _, err := io.ReadFull(r, msg); err != nil {
			return
		}
		n := int(byteorder.BigEndian.Uint32(msg[head-4:]))
		body := make([]byte, n-4)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		msg = append(msg, body...)
		p.mu.Lock()
		match, relaying := p.commitCut, p.mode == "relay"
		p.mu.Unlock()
		cut := false
		if startup {
			startup = n == 8 // SSLRequest, GSSENCRequest: the startup message follows
		} else {
			strs := strings.Split(string(body), "\x00")
			switch msg[0] {
			case 'P': // Parse: name, query
				stmts[strs[0]] = strs[1]
				matched = matched || (match != "" && strings.Contains(strs[1], match))
			case 'B': // Bind: portal, statement
				// A COMMIT in a pipeline (extended protocol) is cut once the
				// pipeline's Sync has passed: the server then runs it all.
				switch q := strings.ToLower(strings.TrimSpace(stmts[strs[1]])); {
				case q == "commit" && matched && match != "":
					cutAtSync = true
				case q == "commit" || q == "rollback":
					matched = false
				default:
					matched = matched || (match != "" && strings.Contains(stmts[strs[1]], match))
				}
			case 'S': // Sync
				cut, cutAtSync = cutAtSync, false
			case 'Q': // Query
				q := strings.ToLower(strings.TrimSpace(strs[0]))
				switch {
				case q == "commit" && matched && match != "":
					cut = true
				case q == "commit" || q == "rollback":
					matched = false
				default:
					matched = matched || (match != "" && strings.Contains(strs[0], match))
				}
			}
		}
		if cut {
			p.mu.Lock()
			cut = p.commitCut == match
			p.commitCut = ""
			p.mu.Unlock()
		}
		if !relaying {
			continue
		}
		if _, err := dst.Write(msg); err != nil {
			return
		}
		if cut {
			swallow.Store(true)
			closeDst = false // the server's answer closes it
			return
		}
	}
}

// cutCommitOf arms the proxy to cut the COMMIT of the next transaction in
// which a statement holds match: the server commits, the client gets no
// answer. It returns a function that reports whether the cut happened.
func (p *pgProxy) cutCommitOf(match string) (cut func() bool) {
	p.mu.Lock()
	p.commitCut = match
	p.mu.Unlock()
	return func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.commitCut == ""
	}
}

func (p *pgProxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// cut closes every connection, and every new one at once.
func (p *pgProxy) cut() {
	p.mu.Lock()
	p.mode = "cut"
	p.mu.Unlock()
	p.closeAll()
}

// stall keeps every connection open and relays nothing.
func (p *pgProxy) stall() {
	p.mu.Lock()
	p.mode = "stall"
	p.mu.Unlock()
}

// restore relays again; connections held while stalled are closed, as a
// network that comes back finds them reset.
func (p *pgProxy) restore() {
	p.closeAll()
	p.mu.Lock()
	p.mode = "relay"
	p.mu.Unlock()
}
