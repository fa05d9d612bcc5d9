// Package postgres is the shared inbox store: every replica of serve and
// dispatch on one PostgreSQL database, so any replica can take any
// delivery, a repeat that lands on another replica is still one row, and
// dispatchers on several machines claim rows without handing one out
// twice. It has the method set of the SQLite store (inbox.Store) over
// inbox's domain types, and applies the same landing rules (inbox.Land).
package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"inbox/inbox"
)

// Defaults for Options fields left zero.
const (
	DefaultMaxConns = 8
	// MinMaxConns is the smallest pool a writable store takes: the writer
	// holds one connection through each group commit, and the dispatcher's
	// claims, the readiness probe and an unknown commit's resolution need
	// another meanwhile.
	MinMaxConns = 2
	// DefaultWriters is how many group commits a store has in flight at
	// once, each on a connection of its own, when Options.Writers is zero:
	// one, whose batch grows with the load, so each WAL flush carries as
	// many deliveries as it can. Several writers take their batches in
	// turn, each beginning while the one before it waits for its COMMIT;
	// they pay where the server's flush is slow (the one batch in flight
	// waits on it), and cost the server a little more CPU where it is
	// fast, for no more deliveries: their batches are smaller.
	DefaultWriters = 1
)

// Options configure Open.
type Options struct {
	// ReadOnly opens sessions that refuse writes (default_transaction_read_only)
	// and applies no migration: Put, and any write, fails, and so does Open
	// when the database's schema is not this build's.
	ReadOnly bool
	// BusyTimeout bounds every operation: connecting, waiting for a row
	// another session holds (lock_timeout), one statement
	// (statement_timeout), and a Put from its call to its commit. Past it
	// the operation fails (and the receiver answers 503).
	BusyTimeout time.Duration
	// MaxBatch bounds how many deliveries one group commit carries.
	MaxBatch int
	// Writers is how many group commits are in flight at once, each on a
	// connection of its own, taking their batches in turn;
	// DefaultWriters when zero. Open refuses as many
	// as MaxConns or more for a writable store: the rest of the store needs
	// a connection beside them.
	Writers int
	// MaxConns bounds the connection pool; DefaultMaxConns when zero.
	// Open refuses fewer than MinMaxConns for a writable store.
	MaxConns int
	// UnsafeNoFsync accepts a server whose fsync or full_page_writes is
	// off, where a crash of the server can lose or corrupt committed rows.
	// For throwaway test servers only; synchronous_commit is enforced
	// regardless.
	UnsafeNoFsync bool
	// Now, when set, is the store's clock in place of the database's
	// (tests). Left nil, every time the store stamps, every lease and every
	// due time is the database's now(), so the clocks of the machines the
	// replicas run on never shorten a lease.
	Now func() time.Time
	// OnCommit, when set, is called by the writers after each group commit
	// with what it carried, how long it took and its error. It runs on a
	// writer's goroutine, so it must return at once, and several writers
	// may call it at once.
	OnCommit func(inbox.Commit)
}

// Store is the PostgreSQL inbox. Deliveries (Put) go through the store's
// writers (Options.Writers), each of which commits those
// waiting together in one transaction, on a connection of its own; every
// other operation runs in its own transaction on the pool. Rows held by
// another transaction (another writer's, another replica's) are waited
// for up to the busy timeout.
type Store struct {
	// What inbox makes of the store's statements (counting, secretUses,
	// reconciling, purging, reprocessing).
	inbox.Sequences

	pool     *pgxpool.Pool
	now      func() time.Time // nil: the database's clock
	busy     time.Duration
	maxBatch int
	writers  int // group commits in flight at once
	readOnly bool
	onCommit func(inbox.Commit)
	// unsafeNoFsync: see Options.UnsafeNoFsync.
	unsafeNoFsync bool

	// probeID keys this store's row of the probe table, which Ping
	// rewrites: a row per replica, so no replica's probe waits for
	// another's commit.
	probeID string

	writer    *inbox.GroupCommit[int]
	closing   chan struct{}
	stopped   sync.WaitGroup
	closeOnce sync.Once
}

// migrateTimeout is the least time Open gives the upgrade of a schema.
const migrateTimeout = 30 * time.Second

// Open connects to the database at url (a postgres:// URL or a key=value
// connection string; its search_path chooses the schema), applies the
// migrations it lacks (or, read-only, checks that none is lacking) and
// starts the writer. It fails when the URL does not parse, the database
// cannot be reached within the busy timeout, a writable session's
// synchronous_commit is off or local or the server's fsync or
// full_page_writes is off (see checkDurable), the role or the database
// takes no writes, a migration fails, or a read-only store finds an older
// schema. A writable store checks every connection it makes as it checks
// the first, and refuses those that would not commit durably.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = inbox.DefaultBusyTimeout
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = inbox.DefaultMaxBatch
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = DefaultMaxConns
	}
	if opts.Writers <= 0 {
		opts.Writers = DefaultWriters
	}
	if opts.MaxConns < MinMaxConns && !opts.ReadOnly {
		return nil, fmt.Errorf("open store: a pool of %d connections is too small: the writer holds one through each commit and the rest of the store needs another; want at least %d", opts.MaxConns, MinMaxConns)
	}
	if opts.Writers >= opts.MaxConns && !opts.ReadOnly {
		return nil, fmt.Errorf("open store: %d writers need a pool of more than %d connections: each holds one through its commits and the rest of the store needs another", opts.Writers, opts.MaxConns)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, badURL(err)
	}
	cfg.MaxConns = int32(opts.MaxConns)
	if cfg.ConnConfig.ConnectTimeout <= 0 || cfg.ConnConfig.ConnectTimeout > opts.BusyTimeout {
		cfg.ConnConfig.ConnectTimeout = opts.BusyTimeout
	}
	// Server-side bounds too, a little inside the client's deadline: the
	// server then ends a statement or a lock wait itself, the session
	// stays usable, and a statement never runs on after the client gave up.
	// A lock wait ends first, so it is reported as one.
	ms := func(d time.Duration) string { return strconv.FormatInt(max(d.Milliseconds(), 1), 10) }
	params := cfg.ConnConfig.RuntimeParams
	params["statement_timeout"] = ms(opts.BusyTimeout * 9 / 10)
	params["lock_timeout"] = ms(opts.BusyTimeout * 4 / 5)
	// A replica that dies inside a transaction must not hold its rows for
	// long: its lease on them is its lease_until, not its session.
	params["idle_in_transaction_session_timeout"] = ms(max(opts.BusyTimeout, 10*time.Second))
	if opts.ReadOnly {
		params["default_transaction_read_only"] = "on"
	} else {
		forceDurable(params)
		cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			return checkDurable(ctx, c, opts.UnsafeNoFsync)
		}
	}
	if params["application_name"] == "" {
		params["application_name"] = "inbox"
	}

	octx, cancel := context.WithTimeout(ctx, 2*opts.BusyTimeout)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(octx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := pool.Ping(octx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	if opts.ReadOnly {
		err = checkVersion(octx, pool)
	} else if err = checkDurable(octx, pool, opts.UnsafeNoFsync); err == nil {
		// An upgrade is many statements, each under the statement timeout;
		// together they may take longer than an open does on a busy server.
		mctx, cancel := context.WithTimeout(ctx, max(2*opts.BusyTimeout, migrateTimeout))
		err = migrate(mctx, pool)
		cancel()
	}
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("open store: %w", explainRefusal(err))
	}
	s := &Store{pool: pool, now: opts.Now, busy: opts.BusyTimeout, maxBatch: opts.MaxBatch, writers: opts.Writers,
		readOnly: opts.ReadOnly, onCommit: opts.OnCommit, unsafeNoFsync: opts.UnsafeNoFsync, closing: make(chan struct{}), probeID: rand.Text()}
	s.Sequences = inbox.NewSequences(s.counts(), secretUses{s}, reconciling{s}, purging{s}, reprocessing{s}, replaying{s}, dismissing{replaying{s}})
	if !opts.ReadOnly {
		// The probe rows of replicas that ended without Close.
		if _, err := pool.Exec(octx, `DELETE FROM probe WHERE at < coalesce($1::bigint, `+dbNow+`) - $2`,
			s.clockArg(), staleProbe.Milliseconds()); err != nil {
			pool.Close()
			return nil, fmt.Errorf("open store: clear old probe rows: %w", explainRefusal(err))
		}
		s.writer = s.newWriter()
		for range s.writers {
			s.stopped.Add(1)
			go s.runWriter()
		}
	}
	return s, nil
}

// staleProbe is how old a probe row is when Open deletes it: its replica
// ended without Close long ago.
const staleProbe = 7 * 24 * time.Hour

// closeTimeout bounds Close's wait on a database that stopped answering:
// the probe row's delete and the pool's close together, in which pgx
// gives each connection it gave up on up to 15 s to deliver a cancel
// request that a hung server or network never takes.
const closeTimeout = time.Second

// Close stops the writer after the batch it is committing, fails
// deliveries that were not yet taken with ErrClosed, deletes this store's
// probe row and closes the pool. On a database that hangs it returns
// within the busy timeout (the batch) and 2 s; connections still closing
// then end on their own, or with the process.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.stopped.Wait()
		// The probe row's delete and the pool's close share one wait: on a
		// database that hangs, Close returns within closeTimeout.
		closed := make(chan struct{})
		go func() {
			if !s.readOnly {
				ctx, cancel := context.WithTimeout(context.Background(), min(s.busy, closeTimeout))
				s.pool.Exec(ctx, `DELETE FROM probe WHERE id = $1`, s.probeID) // best effort: Open clears what stays
				cancel()
			}
			s.pool.Close()
			close(closed)
		}()
		select {
		case <-closed:
		case <-time.After(closeTimeout):
		}
	})
	return nil
}

// Backup is not the store's to do on PostgreSQL: it always fails, saying
// to use pg_dump.
func (s *Store) Backup(ctx context.Context, path string) (int64, error) {
	return 0, errors.New("backup: the store is PostgreSQL: use pg_dump (or the database's own backups) instead")
}

// dbNow is the database's clock in Unix milliseconds: the start of the
// current transaction.
const dbNow = `floor(extract(epoch FROM now()) * 1000)::bigint`

// clockArg is the store's clock for a query that reads
// coalesce($n::bigint, dbNow): nil for the database's own.
func (s *Store) clockArg() any {
	if s.now == nil {
		return nil
	}
	return s.now().UnixMilli()
}

// txNow reads the store's clock inside tx, in Unix milliseconds.
func (s *Store) txNow(ctx context.Context, tx pgx.Tx) (int64, error) {
	var now int64
	if err := tx.QueryRow(ctx, `SELECT coalesce($1::bigint, `+dbNow+`)`, s.clockArg()).Scan(&now); err != nil {
		return 0, fmt.Errorf("read the clock: %w", err)
	}
	return now, nil
}

// localNow is this process's clock: the injected one when set.
func (s *Store) localNow() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// errRetry marks a transaction that met a row another one changed under
// it (deleted between being found and being locked): it is run again.
var errRetry = errors.New("a row changed under the transaction")

// maxAttempts bounds how often a transaction that deadlocked, failed to
// serialize or met errRetry is run again.
const maxAttempts = 4

// retryable reports whether err is worth running the transaction again
// for: a deadlock, a serialization failure, or errRetry.
func retryable(err error) bool {
	if errors.Is(err, errRetry) {
		return true
	}
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}

// inTx runs fn in a transaction, and runs it again (up to maxAttempts,
// while ctx lasts) when it failed before COMMIT in a way a new attempt can
// cure: a deadlock, a serialization failure, errRetry, or a connection
// that broke (a restarted server, a terminated backend), which the pool
// then replaces. A COMMIT whose answer was lost is looked up on another
// connection: committed, it succeeded; not committed, it may run again;
// neither known within the busy timeout, it fails, and may have committed.
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	for attempt := 1; ; attempt++ {
		again, err := s.tryTx(ctx, fn)
		if err == nil || !again || attempt == maxAttempts || ctx.Err() != nil {
			return err
		}
	}
}

// tryTx runs fn in one transaction; again reports whether a new attempt
// may succeed where this one failed.
func (s *Store) tryTx(ctx context.Context, fn func(tx pgx.Tx) error) (again bool, err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		// Nothing was done: connecting failed, or BEGIN met a broken
		// connection, which the pool has dropped.
		return true, err
	}
	if err := fn(tx); err != nil {
		broken := tx.Conn().IsClosed()
		tx.Rollback(ctx) // bounded by ctx; on a broken connection it returns at once
		return retryable(err) || broken, err
	}
	xid, err := s.beforeCommit(ctx, tx)
	if err != nil {
		broken := tx.Conn().IsClosed()
		tx.Rollback(ctx)
		return broken, err
	}
	if err := tx.Commit(ctx); err != nil {
		if xid == nil || outcomeKnown(err) {
			// Not committed, or nothing to commit.
			return retryable(err), err
		}
		// The answer to COMMIT was lost: ask the server what became of it
		// rather than guess. Known not to have committed, it may run again.
		committed, oerr := s.commitOutcome(ctx, *xid)
		switch {
		case oerr != nil:
			return false, fmt.Errorf("%w; whether it committed is unknown: %w", err, oerr)
		case committed:
			return false, nil
		}
		return true, err
	}
	return false, nil
}

// pgText makes s storable in a text column, which refuses NUL and bytes
// that are not UTF-8: each such byte becomes U+FFFD. The body, bytea, is
// kept byte for byte; this touches only what was read out of it.
func pgText(s string) string {
	if utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// nullable maps "" to SQL NULL.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
