// Package sqlite is the embedded inbox store: one SQLite file (WAL,
// synchronous FULL) on the machine serve runs on, written through one
// writer goroutine that commits the deliveries waiting together (group
// commit), with a checkpointer beside it, read through query-only
// connections, upgraded in place from the files earlier versions made, and
// guarded against its file being removed or replaced. *Store implements
// inbox.Store, and backs itself up (Backup).
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"inbox/inbox"
)

// Defaults for Options fields left zero.
const (
	readConns = 4
)

// Options configure Open.
type Options struct {
	// Schema is applied at open when set (the contents of schema.sql). Every
	// statement in it must be idempotent. Read-only, it is not applied: the
	// open fails when the database lacks a table or column it makes.
	Schema string
	// ReadOnly opens only the read pool: Put, and any write, fails.
	ReadOnly bool
	// MustExist refuses to create a database that is not there yet; the
	// admin commands use it so a mistyped path is an error, not a new file.
	MustExist bool
	// BusyTimeout is how long a connection waits for another process's lock
	// before the operation fails (and the receiver answers 503).
	BusyTimeout time.Duration
	// MaxBatch bounds how many deliveries one group commit carries.
	MaxBatch int
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// OnCommit, when set, is called by the writer after each group commit
	// with what it carried, how long it took and its error. It runs on the
	// writer goroutine, so it must return at once. Commits that carried
	// only Ping's probe are not reported.
	OnCommit func(inbox.Commit)
	// OnFileLost, when set, is called once when the database path (or its
	// -wal's or -shm's) stops naming the file the store has open, with the
	// error saying how (it wraps ErrFileLost), and with nil once it names it
	// again. It runs on whichever of the store's goroutines noticed, within
	// a second, so it must return at once and must not call the store.
	OnFileLost func(err error)
	// NoCheckpoints leaves the WAL's checkpoints to another (a
	// replica.Replicator, which copies the WAL's frames before it
	// checkpoints them): the store then runs none, neither its
	// checkpointer's nor its writer's automatic one.
	NoCheckpoints bool
}

// Store is the SQLite inbox store. It has one write connection. Deliveries (Put)
// go through the writer goroutine, which commits those waiting together in
// one transaction. The operator's writes (Reprocess, Purge) and Ping begin
// their own IMMEDIATE transactions on that same connection, so they take
// turns with the writer's commits; other processes' writes wait on SQLite's
// lock, up to the busy timeout. Reads (Get, List, Stats, ParkedByReason,
// Purgeable, and Reprocess's reading of bodies) use their own query-only
// connections, so they never wait behind a commit.
type Store struct {
	// What inbox makes of the store's statements (counting, secretUses,
	// reconciling, purging, reprocessing).
	inbox.Sequences

	path     string
	now      func() time.Time
	maxBatch int
	busy     time.Duration
	causes   sendCauses     // why send gives up, for busy
	handoffs sharedDeadline // what deliveries wait for the writer under
	commits  sharedDeadline // what deliveries wait for their commit under
	onCommit func(inbox.Commit)

	guard *guard // nil when read-only

	write  *sql.DB       // nil when read-only
	stmts  *writerStmts  // the writer's statements, prepared once on the write connection
	parsed *parseCounter // statements the write connection ran from their text
	ckpt   *sql.DB       // the checkpointer's own connection; nil when read-only
	read   *sql.DB

	writer    *inbox.GroupCommit[task]
	closing   chan struct{}
	stopped   sync.WaitGroup // the writer and the checkpointer
	closeOnce sync.Once
	closeErr  error

	noCheckpoints bool
}

// Open opens (and unless opts.MustExist, creates) the inbox at path, checks
// that WAL and synchronous FULL are in force, upgrades a database made by an
// earlier version (see migrate) and applies opts.Schema. It fails if the
// file cannot be created or opened, has more than one hard link (see
// oneName), is not a database, or the pragmas do not
// take; read-only, also when the database needs the upgrade (ErrUpgrade).
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("open store: invalid database path %q", path)
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = inbox.DefaultBusyTimeout
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = inbox.DefaultMaxBatch
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := createFile(path, opts.MustExist || opts.ReadOnly); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := oneName(path); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	s := &Store{path: path, now: opts.Now, maxBatch: opts.MaxBatch, busy: opts.BusyTimeout,
		causes: newSendCauses(opts.BusyTimeout), onCommit: opts.OnCommit, noCheckpoints: opts.NoCheckpoints}
	s.Sequences = inbox.NewSequences(s.counts(), secretUses{s}, reconciling{s}, purging{s}, reprocessing{s}, replaying{s}, dismissing{replaying{s}})

	var err error
	if !opts.ReadOnly {
		s.guard = &guard{}
		if err := s.guard.watchDatabase(path); err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
		s.parsed = &parseCounter{}
		if s.write, err = openWriter(ctx, path, opts, s.guard, s.parsed); err != nil {
			return nil, err
		}
		if err := s.watchFiles(); err != nil {
			s.closeDBs()
			return nil, fmt.Errorf("open store: %w", err)
		}
		s.guard.onChange = opts.OnFileLost
	}
	if s.read, err = openPool(path, readDSN(opts.BusyTimeout), readConns, s.guard, nil); err != nil {
		s.closeDBs()
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := s.read.PingContext(ctx); err != nil {
		s.closeDBs()
		return nil, fmt.Errorf("open store: %w", err)
	}
	if opts.ReadOnly {
		// A read-only store cannot add the tables and columns its queries
		// read.
		if err := current(ctx, s.read, opts.Schema); err != nil {
			s.closeDBs()
			if errors.Is(err, ErrUpgrade) {
				return nil, fmt.Errorf("open store: %s was %w: run inbox migrate --db %s once (serve and dispatch upgrade it too as they start)", path, err, path)
			}
			return nil, fmt.Errorf("open store: %w", err)
		}
	}
	if !opts.ReadOnly {
		// Preparing once saves the writer a parse per row of each statement
		// it runs, which profiles showed was half the cost of an insert, and
		// more than that of a repeat.
		if s.stmts, err = prepareWriter(ctx, s.write); err != nil {
			s.closeDBs()
			return nil, fmt.Errorf("open store: %w", err)
		}
		if s.ckpt, err = openPool(path, writeDSN(opts.BusyTimeout).Encode(), 1, s.guard, nil); err != nil {
			s.closeDBs()
			return nil, fmt.Errorf("open store: %w", err)
		}
		s.closing = make(chan struct{})
		s.writer = s.newWriter()
		s.stopped.Add(2)
		go s.runWriter()
		go s.runCheckpointer()
	}
	return s, nil
}

// watchFiles adds the -wal and -shm files to what the guard watches, once
// the write connection has made them; SQLite names them after the
// database's real path, symbolic links resolved. It fails when the path
// named another file by the time SQLite opened it.
func (s *Store) watchFiles() error {
	if err := s.guard.check(); err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(s.path)
	if err != nil {
		return err
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := s.guard.watch(real+suffix, "its "+suffix); err != nil {
			return err
		}
	}
	return nil
}

// openWriter opens the single write connection, checks the pragmas, adds
// the columns an older database lacks and applies the schema.
func openWriter(ctx context.Context, path string, opts Options, g *guard, parsed *parseCounter) (*sql.DB, error) {
	// One connection: SQLite admits one writer at a time anyway, and a single
	// connection (the writer goroutine's commits, and Reprocess's and Purge's
	// transactions, one after another) serializes our own writes without
	// busy-waiting on ourselves, leaving busy_timeout for other processes
	// (the admin CLI).
	q := writeDSN(opts.BusyTimeout)
	frames := writerCheckpointFrames
	if opts.NoCheckpoints {
		frames = 0
	}
	q.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", frames))
	db, err := openPool(path, q.Encode(), 1, g, parsed)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	var mode string
	var sync int
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	if mode != "wal" || sync != 2 {
		db.Close()
		return nil, fmt.Errorf("open store: journal_mode=%s synchronous=%d, want wal and 2 (FULL)", mode, sync)
	}
	if err := migrate(ctx, db, opts.Schema); err != nil {
		db.Close()
		return nil, upgradeFull(err, path)
	}
	return db, nil
}

// upgradeFull says what to do when an upgrade failed for a full disk: an
// upgrade that rebuilds tables copies them inside the file, so it needs
// about the file's size free. Nothing was changed: the transaction rolled
// back. Any other error is returned as it is.
func upgradeFull(err error, path string) error {
	var se *sqlite.Error
	if !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_FULL {
		return err
	}
	need := "about the database file's size"
	if fi, statErr := os.Stat(path); statErr == nil {
		need = fmt.Sprintf("about %d MiB (the database file's size)", fi.Size()>>20+1)
	}
	return fmt.Errorf("%w: this upgrade copies the tables inside the database file and needs %s free on its disk; nothing was changed: free space (or move the file to a larger disk) and run inbox migrate", err, need)
}

// writeDSN carries every pragma in the DSN so that each connection the pool
// opens gets them (a PRAGMA through Exec reaches only one connection).
// Transactions begin IMMEDIATE: busy_timeout does not cover a read
// transaction that later upgrades to a write. temp_store(MEMORY) keeps the
// statement journal of each op's savepoint in memory: past 64 KiB (a
// dispatcher's transaction of settlements and claims) SQLite otherwise
// spills it to a temporary file, written page by page, in every
// transaction. It holds only what a savepoint would roll back; the WAL
// alone makes a commit durable.
func writeDSN(busy time.Duration) url.Values {
	q := busyDSN(busy)
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "foreign_keys(ON)")
	q.Add("_pragma", "temp_store(MEMORY)")
	q.Set("_txlock", "immediate")
	return q
}

// readDSN opens connections that refuse writes.
func readDSN(busy time.Duration) string {
	q := busyDSN(busy)
	q.Add("_pragma", "query_only(ON)")
	return q.Encode()
}

// busyDSN opens connections that wait up to busy for another's lock. Each
// opens the file only if it exists (mode=rw): a connection the pool opens
// later, after the file was removed, must not create an empty one.
func busyDSN(busy time.Duration) url.Values {
	q := url.Values{}
	q.Set("mode", "rw")
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	return q
}

// fileURI is path as an SQLite URI, so that the mode in the DSN reaches
// SQLite (the driver passes a plain path's query to no one).
func fileURI(path string) string {
	p := strings.ReplaceAll(path, "%", "%25")
	if filepath.IsAbs(p) {
		return "file://" + p
	}
	return "file:" + p
}

// openPool opens a pool of up to conns connections to path. With g, each
// connection refuses to open, begin or commit once g finds a file lost,
// and counts in parsed (when set) the statements it runs from their text.
func openPool(path, dsn string, conns int, g *guard, parsed *parseCounter) (*sql.DB, error) {
	c, err := sqlite.NewConnector(fileURI(path) + "?" + dsn)
	if err != nil {
		return nil, err
	}
	if g != nil {
		c = &guardedConnector{base: c, g: g, parsed: parsed}
	}
	db := sql.OpenDB(c)
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	return db, nil
}

// createFile makes the database file readable by its owner only before
// SQLite creates it (SQLite gives the -wal and -shm files the same mode).
// It refuses to when a -wal or -shm file is there without its database:
// the database was moved or removed while in use, and an empty one in its
// place would hide that every row is gone.
//
// With mustExist it also refuses an empty file, which SQLite would take
// for a new database (a command that writes would make an empty inbox in
// it): one left by a copy or a restore that did not finish, or by touch.
func createFile(path string, mustExist bool) error {
	if fi, err := os.Stat(path); err == nil {
		if wal, err := os.Stat(path + "-wal"); mustExist && fi.Mode().IsRegular() && fi.Size() == 0 && (err != nil || wal.Size() == 0) {
			return fmt.Errorf("%s is an empty file, not an inbox database (a copy or restore that did not finish?): point --db at the database", path)
		}
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if mustExist {
		return fmt.Errorf("no inbox database at %s", path)
	}
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("%s is a symbolic link to a file that does not exist: the database was moved or removed; point it at the database, or remove the link", path)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if _, err := os.Lstat(path + suffix); err == nil {
			return fmt.Errorf("no database at %s, but its %s file is there: the database was moved or removed while in use; put it back, or remove %s-wal and %s-shm to start an empty inbox",
				path, suffix, path, path)
		}
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return f.Close()
}

// Path returns the database file's path.
func (s *Store) Path() string { return s.path }

// Close stops the writer after the batch it is committing, fails deliveries
// that were not yet taken with ErrClosed, and closes the database. When a
// file was lost (see ErrFileLost) it first copies every committed page into
// the database file it has open and empties the -wal: SQLite skips that
// checkpoint when the database has moved, and the -wal left at the path
// would be replayed into whatever database is opened there next. The
// emptied -wal stays: at a path that names no database now, it makes the
// next start refuse to create an empty one (see createFile).
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		if s.write != nil {
			close(s.closing)
			s.stopped.Wait()
			if s.guard.check() != nil {
				errs = append(errs, s.checkpointLost())
			}
		}
		s.closeErr = errors.Join(append(errs, s.closeDBs())...)
	})
	return s.closeErr
}

// checkpointLost runs a TRUNCATE checkpoint on the write connection, or on
// the checkpointer's when that one is gone. It fails when another process's
// reader kept it from copying every page.
func (s *Store) checkpointLost() error {
	var err error
	for _, db := range []*sql.DB{s.write, s.ckpt} {
		var busy, frames, copied int
		if err = db.QueryRow("PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &frames, &copied); err == nil {
			if busy != 0 {
				return fmt.Errorf("close store: copy the WAL into the lost database file: another process kept it busy; %d of %d pages copied", copied, frames)
			}
			return nil
		}
	}
	return fmt.Errorf("close store: copy the WAL into the lost database file: %w", err)
}

func (s *Store) closeDBs() error {
	var errs []error
	if s.stmts != nil {
		errs = append(errs, s.stmts.close())
	}
	if s.write != nil {
		errs = append(errs, s.write.Close())
	}
	if s.ckpt != nil {
		errs = append(errs, s.ckpt.Close())
	}
	if s.read != nil {
		errs = append(errs, s.read.Close())
	}
	// Last: its descriptor's close would drop SQLite's locks.
	errs = append(errs, s.guard.close())
	return errors.Join(errs...)
}

func millis(t time.Time) int64 { return t.UnixMilli() }

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
