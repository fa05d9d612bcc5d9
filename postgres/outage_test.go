package postgres_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"inbox/inbox"
	"inbox/postgres"
)

// proxy relays connections from a loopback port to the test database, and
// can refuse them (down), or keep them open and relay nothing (stall), as
// a network or a database that went away would.
type proxy struct {
	t      *testing.T
	target string
	addr   string

	mu      sync.Mutex
	ln      net.Listener
	conns   []net.Conn
	stalled bool
}

func startProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, target: target, addr: ln.Addr().String(), ln: ln}
	go p.accept(ln)
	t.Cleanup(p.down)
	return p
}

func (p *proxy) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.conns = append(p.conns, c)
		stalled := p.stalled
		p.mu.Unlock()
		if stalled {
			continue // held open, never answered
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, up)
		p.mu.Unlock()
		go p.relay(up, c)
		go p.relay(c, up)
	}
}

// relay copies src to dst, dropping what it reads while stalled.
func (p *proxy) relay(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.mu.Lock()
		stalled := p.stalled
		p.mu.Unlock()
		if n > 0 && !stalled {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				dst.Close()
			}
			return
		}
	}
}

// down closes the listener and every connection: connections are refused.
func (p *proxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// up listens again on the same port and relays again.
func (p *proxy) up() {
	p.t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("listen again on %s: %v", p.addr, err)
	}
	p.mu.Lock()
	p.ln, p.stalled = ln, false
	p.mu.Unlock()
	go p.accept(ln)
}

// stall keeps every connection open and relays nothing.
func (p *proxy) stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stalled = true
}

// through returns dsn with its host replaced by the proxy's.
func (p *proxy) through(dsn string) string {
	u, _ := url.Parse(dsn)
	u.Host = p.addr
	return u.String()
}

func proxied(t *testing.T) (*proxy, string) {
	dsn := migratedURL(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	host := u.Host
	if u.Port() == "" {
		host += ":5432"
	}
	p := startProxy(t, host)
	return p, p.through(dsn)
}

const busy = 500 * time.Millisecond

// bound is the contract's limit on a failing write: the busy timeout and
// half a second (RECEIVER-CONTRACT row 19).
const bound = busy + 500*time.Millisecond

// timedPut puts d and returns its error and how long it took.
func timedPut(s *postgres.Store, d inbox.Delivery) (time.Duration, error) {
	start := time.Now()
	_, err := s.Put(context.Background(), d)
	return time.Since(start), err
}

// recovers puts d until it succeeds, for up to 15 s, and returns how long
// that took.
func recovers(t *testing.T, s *postgres.Store, d inbox.Delivery) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		_, err := s.Put(context.Background(), d)
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > 15*time.Second {
			t.Fatalf("no recovery after %s: %v", time.Since(start), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPutWhileDatabaseDown refuses the store's connections: a Put fails
// within the bound and keeps nothing, Ping fails too, and once the
// database is back the store recovers by itself.
func TestPutWhileDatabaseDown(t *testing.T) {
	t.Parallel()
	p, dsn := proxied(t)
	s := mustOpen(t, dsn, postgres.Options{BusyTimeout: busy})
	if _, err := s.Put(context.Background(), job("job_1")); err != nil {
		t.Fatal(err)
	}
	p.down()
	took, err := timedPut(s, job("job_2"))
	t.Logf("put while down failed in %s (bound %s): %v", took, bound, err)
	if err == nil || took > bound {
		t.Fatalf("put while down: %v after %s, want an error within %s", err, took, bound)
	}
	if err := s.Ping(context.Background()); err == nil {
		t.Error("ping while down: no error")
	}
	p.up()
	t.Logf("recovered in %s", recovers(t, s, job("job_3")))
	if _, err := s.Get(context.Background(), "job_2"); !errors.Is(err, inbox.ErrNotFound) {
		t.Errorf("the refused delivery was kept: %v", err)
	}
	if e, err := s.Get(context.Background(), "job_1"); err != nil || e.Deliveries != 1 {
		t.Errorf("job_1 = %+v %v", e, err)
	}
}

// TestPutWhileDatabaseStalls keeps the store's connections open and
// answers nothing, the way a partitioned network does: Put, Settle, the
// reads, the counts, Purge and Ping fail within the bound rather than hang.
func TestPutWhileDatabaseStalls(t *testing.T) {
	t.Parallel()
	p, dsn := proxied(t)
	s := mustOpen(t, dsn, postgres.Options{BusyTimeout: busy})
	ctx := context.Background()
	if _, err := s.Put(ctx, job("job_1")); err != nil {
		t.Fatal(err)
	}
	p.stall()
	took, err := timedPut(s, job("job_2"))
	t.Logf("put while stalled failed in %s (bound %s): %v", took, bound, err)
	if err == nil || took > bound {
		t.Fatalf("put while stalled: %v after %s, want an error within %s", err, took, bound)
	}
	for name, op := range map[string]func() error{
		"settle": func() error {
			_, _, err := s.Settle(ctx, "a", nil, inbox.Claim{Now: time.Now(), Until: time.Now().Add(time.Minute), Max: 1})
			return err
		},
		"get":   func() error { _, err := s.Get(ctx, "job_1"); return err },
		"list":  func() error { _, err := s.List(ctx, inbox.Filter{}); return err },
		"stats": func() error { _, err := s.Stats(ctx); return err },
		"purge": func() error {
			_, err := s.Purge(ctx, inbox.PurgeSelection{Before: time.Now().Add(-30 * 24 * time.Hour),
				Statuses: []inbox.Status{inbox.StatusDone}, Reasons: inbox.ReceiptReasons()})
			return err
		},
		"purgeable": func() error {
			_, err := s.Purgeable(ctx, inbox.PurgeSelection{Before: time.Now().Add(-30 * 24 * time.Hour), Statuses: []inbox.Status{inbox.StatusDone}})
			return err
		},
		"count":           func() error { _, err := s.Count(ctx, inbox.Filter{}); return err },
		"parked per hour": func() error { _, err := s.ParkedPerHour(ctx, inbox.Filter{}, time.Now(), 48); return err },
		"ping":            func() error { return s.Ping(ctx) },
	} {
		start := time.Now()
		err := op()
		if took := time.Since(start); err == nil || took > bound {
			t.Errorf("%s while stalled: %v after %s, want an error within %s", name, err, took, bound)
		}
	}
	// The partition heals as networks do: the stalled connections reset.
	p.down()
	p.up()
	t.Logf("recovered in %s", recovers(t, s, job("job_3")))
}

// TestOpenRefused opens a store on a port nothing listens on: Open fails
// within the bound, and its error does not carry the URL's password.
func TestOpenRefused(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	start := time.Now()
	_, err = postgres.Open(context.Background(), "postgres://inbox:s3cret-pw@"+addr+"/inbox?sslmode=disable", postgres.Options{BusyTimeout: busy})
	took := time.Since(start)
	t.Logf("open refused in %s: %v", took, err)
	if err == nil || took > 2*bound {
		t.Fatalf("open on a closed port: %v after %s", err, took)
	}
	if strings.Contains(err.Error(), "s3cret-pw") {
		t.Errorf("the error shows the password: %v", err)
	}
	if _, err := postgres.Open(context.Background(), "postgres://inbox:s3cret-pw@%zz/", postgres.Options{}); err == nil || strings.Contains(err.Error(), "s3cret-pw") {
		t.Errorf("a URL that does not parse: %v", err)
	}
}

// TestRowHeldPastTheTimeout holds a row from another session: a delivery
// that must count a repeat on it fails within the bound, the next batch
// commits, and once the row is free the repeat is counted.
func TestRowHeldPastTheTimeout(t *testing.T) {
	t.Parallel()
	dsn := migratedURL(t)
	s := mustOpen(t, dsn, postgres.Options{BusyTimeout: busy})
	ctx := context.Background()
	if _, err := s.Put(ctx, job("job_1")); err != nil {
		t.Fatal(err)
	}
	held := make(chan struct{})
	release := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- holdRow(ctx, dsn, "job_1", held, release) }()
	select {
	case <-held:
	case err := <-done:
		t.Fatal(err)
	}
	took, err := timedPut(s, job("job_1"))
	t.Logf("put onto a held row failed in %s (bound %s): %v", took, bound, err)
	if err == nil || took > bound {
		t.Fatalf("put onto a held row: %v after %s, want an error within %s", err, took, bound)
	}
	if _, err := s.Put(ctx, job("job_2")); err != nil {
		t.Errorf("the next batch: %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if res, err := s.Put(ctx, job("job_1")); err != nil || res.Outcome != inbox.OutcomeDuplicate {
		t.Fatalf("put once the row is free: %+v %v", res, err)
	}
	if e, err := s.Get(ctx, "job_1"); err != nil || e.Deliveries != 2 {
		t.Errorf("job_1 = %+v %v, want 2 deliveries: the failed one not counted", e, err)
	}
}

// TestRecoversFromTerminatedBackends terminates every connection of the
// store on the server, as a restart or a failover does: the next Put and
// Settle succeed on new connections.
func TestRecoversFromTerminatedBackends(t *testing.T) {
	t.Parallel()
	dsn := migratedURL(t)
	u, _ := url.Parse(dsn)
	q := u.Query()
	name := "inbox_" + strings.TrimPrefix(q.Get("search_path"), "t_")
	q.Set("application_name", name)
	u.RawQuery = q.Encode()
	s := mustOpen(t, u.String(), postgres.Options{BusyTimeout: busy})
	ctx := context.Background()
	if _, err := s.Put(ctx, job("job_1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	exec(t, dsn, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, name)
	if _, err := s.Put(ctx, job("job_2")); err != nil {
		t.Errorf("put after the backends were terminated: %v", err)
	}
	exec(t, dsn, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, name)
	if jobs, _, err := s.Settle(ctx, "a", nil, inbox.Claim{Now: time.Now(), Until: time.Now().Add(time.Minute), Max: 5}); err != nil || len(jobs) != 2 {
		t.Errorf("claim after the backends were terminated: %d jobs, %v", len(jobs), err)
	}
}

// TestSchemaVersions: a read-only store refuses a schema this build has not
// made yet, and every store refuses one newer than it knows.
func TestSchemaVersions(t *testing.T) {
	t.Parallel()
	dsn := testURL(t)
	ctx := context.Background()
	_, err := postgres.Open(ctx, dsn, postgres.Options{ReadOnly: true})
	if err == nil || !strings.Contains(err.Error(), "upgrade") {
		t.Fatalf("read-only on an empty schema: %v, want told to upgrade", err)
	}
	mustOpen(t, dsn, postgres.Options{}).Close()
	ro := mustOpen(t, dsn, postgres.Options{ReadOnly: true})
	if _, err := ro.Put(ctx, job("job_1")); err == nil {
		t.Error("a read-only store took a delivery")
	}
	if _, err := ro.Stats(ctx); err != nil {
		t.Errorf("stats on a read-only store: %v", err)
	}
	exec(t, dsn, `INSERT INTO `+searchPath(dsn)+`.inbox_migrations (version, name) VALUES (99, '0099_future.sql')`)
	for _, opts := range []postgres.Options{{}, {ReadOnly: true}} {
		if _, err := postgres.Open(ctx, dsn, opts); err == nil || !strings.Contains(err.Error(), "newer") {
			t.Errorf("open %+v on a newer schema: %v", opts, err)
		}
	}
}

// holdRow locks the row id from a session of its own, as another replica's
// transaction would, closes held, and keeps the lock until release closes.
func holdRow(ctx context.Context, dsn, id string, held, release chan struct{}) error {
	return hold(ctx, dsn, held, release, `SELECT 1 FROM events WHERE id = $1 FOR UPDATE`, id)
}

// holdTable locks table against writes (SHARE mode) from a session of its
// own, closes held, and keeps the lock until release closes.
func holdTable(ctx context.Context, dsn, table string, held, release chan struct{}) error {
	return hold(ctx, dsn, held, release, `LOCK TABLE `+table+` IN SHARE MODE`)
}

// hold runs stmt in a transaction of a session of its own, closes held,
// and keeps the transaction open until release closes.
func hold(ctx context.Context, dsn string, held, release chan struct{}, stmt string, args ...any) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, stmt, args...); err != nil {
		return err
	}
	close(held)
	<-release
	return nil
}

// holdingRow holds the row id from a session of its own until the returned
// free is called (or the test ends).
func holdingRow(t *testing.T, dsn, id string) (free func()) {
	t.Helper()
	held, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() { done <- holdRow(context.Background(), dsn, id, held, release) }()
	select {
	case <-held:
	case err := <-done:
		t.Fatal(err)
	}
	var once sync.Once
	free = func() {
		once.Do(func() {
			close(release)
			if err := <-done; err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(free)
	return free
}

func searchPath(dsn string) string {
	u, _ := url.Parse(dsn)
	return u.Query().Get("search_path")
}
