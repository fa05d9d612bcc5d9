package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
)

// ErrFileLost is wrapped by every write, and by Ping, once a path the
// store opened no longer names the file it has open: the database (or its
// -wal or -shm) was removed, renamed or replaced under the process. A
// commit then would land in a file nobody will find again, so none is
// made: the receiver answers 503 until the file is back at its path.
var ErrFileLost = errors.New("database file lost")

// guard holds a writable store to the files it opened. SQLite keeps
// using the file descriptors it has, whatever happens to the names: without
// the guard a removed database goes on taking commits into an unlinked
// file, and a new connection would open (or create) whatever the path
// names now.
//
// It also reads the database's header (see header) through a descriptor of
// its own, for what the names cannot show: the file overwritten in place
// (cp over it, truncated, ": >" to it). That verdict is final: the bytes
// the store had committed are gone from the file whatever its name says.
type guard struct {
	mu    sync.Mutex
	files []watchedFile
	lost  error // the last check's verdict
	// onChange is called, under mu so calls keep their order, when the
	// verdict changes: with the error when a file is lost, nil when it is
	// back.
	onChange func(error)

	db   *os.File // the database, as opened when watched; nil if none
	head header   // the header as last read, once it was a database's
	size int64    // the file's size when head was read
	// headerAt is when the header was last read.
	headerAt time.Time
	// overwritten is the final verdict, once the header shows the file
	// was overwritten; read without mu by the connections' every query.
	overwritten atomic.Pointer[error]
	// checks counts the checks made, each a stat of every watched path.
	checks atomic.Int64
}

type watchedFile struct {
	path string
	what string // for the error: "the database", "its -wal"
	fi   os.FileInfo
}

// watch adds the file at path, as it is now, to what check compares.
func (g *guard) watch(path, what string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.files = append(g.files, watchedFile{path: path, what: what, fi: fi})
	return nil
}

// watchDatabase watches the database file at path as watch does, and
// keeps a descriptor of it open to read its header through, until close.
// The descriptor must outlive every SQLite connection to the file: closing
// any descriptor of a file drops every POSIX lock the process holds on it,
// SQLite's too.
func (g *guard) watchDatabase(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.db = f
	g.files = append(g.files, watchedFile{path: path, what: "the database", fi: fi})
	return nil
}

// close closes the database's descriptor. It must be called only once
// every connection to the database is closed.
func (g *guard) close() error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.db == nil {
		return nil
	}
	err := g.db.Close()
	g.db = nil
	return err
}

// check stats every watched path and returns an error wrapping ErrFileLost
// when one no longer names the file it named when watched, or when the
// database file was overwritten in place (see overwrite). A nil guard
// checks nothing.
func (g *guard) check() error {
	if g == nil {
		return nil
	}
	g.checks.Add(1)
	g.mu.Lock()
	defer g.mu.Unlock()
	var err error
	if p := g.overwritten.Load(); p != nil {
		err = *p
	}
	for _, f := range g.files {
		if err != nil {
			break
		}
		fi, serr := os.Stat(f.path)
		switch {
		case errors.Is(serr, fs.ErrNotExist):
			err = fmt.Errorf("%w: %s (%s) was removed or renamed", ErrFileLost, f.path, f.what)
		case serr != nil:
			err = fmt.Errorf("%w: %s (%s): %w", ErrFileLost, f.path, f.what, serr)
		case !os.SameFile(fi, f.fi):
			err = fmt.Errorf("%w: %s (%s) is another file now: it was replaced", ErrFileLost, f.path, f.what)
		case f.what == "the database" && g.db != nil:
			// At most every headerEvery: check runs several times in each
			// commit, and the commit path must not pay for reads.
			now := time.Now()
			if now.Sub(g.headerAt) < headerEvery {
				break
			}
			g.headerAt = now
			if why := g.overwrite(fi.Size()); why != "" {
				err = fmt.Errorf("%w: %s (the database) was overwritten in place: %s; stop serve, and restore only while it is stopped", ErrFileLost, f.path, why)
				g.overwritten.Store(&err)
			}
		}
	}
	if (err == nil) != (g.lost == nil) && g.onChange != nil {
		g.onChange(err)
	}
	g.lost = err
	return err
}

// final returns the error of the final verdict, that the database was
// overwritten, or nil.
func (g *guard) final() error {
	if g == nil {
		return nil
	}
	if p := g.overwritten.Load(); p != nil {
		return *p
	}
	return nil
}

// last returns the last check's verdict without checking again.
func (g *guard) last() error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lost
}

// guardedConnector opens connections that refuse to open, begin or commit
// once the guard finds a file lost.
type guardedConnector struct {
	base driver.Connector
	g    *guard
	// parsed, when set, counts the statements the connections run from
	// their text rather than prepared.
	parsed *parseCounter
}

func (c *guardedConnector) Driver() driver.Driver { return c.base.Driver() }

// Connect refuses a new connection once a file is lost: it would open
// whatever the path names now, another database or none.
func (c *guardedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	if err := c.g.check(); err != nil {
		return nil, fmt.Errorf("open a connection: %w", err)
	}
	conn, err := c.base.Connect(ctx)
	if err != nil {
		return nil, err
	}
	inner, ok := conn.(sqliteConn)
	if !ok {
		conn.Close()
		return nil, errors.New("open a connection: the sqlite driver's connection lacks an interface the store needs")
	}
	// The hook runs inside every COMMIT, explicit or not, on this
	// connection: the last moment a write can still be refused.
	if h, ok := conn.(sqlite.HookRegisterer); ok {
		h.RegisterCommitHook(func() int32 {
			if c.g.check() != nil {
				return 1 // turns the COMMIT into a ROLLBACK
			}
			return 0
		})
	}
	return &guardedConn{sqliteConn: inner, g: c.g, parsed: c.parsed}, nil
}

// sqliteConn is every interface the driver's connections implement that
// database/sql looks for; a wrapper that hid one would change how
// database/sql uses the connection (see sqlite.NewConnector).
type sqliteConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

type guardedConn struct {
	sqliteConn
	g      *guard
	parsed *parseCounter // nil: not counted
}

// Unwrap returns the driver's connection (sqlite.Limit looks through
// wrappers this way).
func (c *guardedConn) Unwrap() driver.Conn { return c.sqliteConn }

// ExecContext and QueryContext refuse every statement once the database
// was overwritten (a checkpoint would copy the store's pages into whatever
// was written over it; a read would mix the two); until then they cost a
// load, and count the statement in parsed when it is counted.
func (c *guardedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if err := c.g.final(); err != nil {
		return nil, err
	}
	if c.parsed != nil {
		c.parsed.n.Add(1) // a statement run from its text: parsed
	}
	return c.sqliteConn.ExecContext(ctx, query, args)
}

func (c *guardedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if err := c.g.final(); err != nil {
		return nil, err
	}
	if c.parsed != nil {
		c.parsed.n.Add(1)
	}
	return c.sqliteConn.QueryContext(ctx, query, args)
}

func (c *guardedConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

// BeginTx refuses to begin once a file is lost, and checks again once the
// BEGIN has its lock: it may have waited for it while the file went. A
// transaction begun with checkedAtCommit skips both: the writer's commits
// are checked by the commit hook and again once committed (commitTx), which
// a loss before or during the commit cannot pass, and the two checks here
// would double the stat calls of every commit.
func (c *guardedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	checked := ctx.Value(checkedAtCommit{}) != nil
	if !checked {
		if err := c.g.check(); err != nil {
			return nil, err
		}
	}
	tx, err := c.sqliteConn.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	if !checked {
		if err := c.g.check(); err != nil {
			tx.Rollback()
			return nil, err
		}
	}
	return &guardedTx{Tx: tx, g: c.g}, nil
}

// checkedAtCommit, as a context's value, tells BeginTx that whoever begins
// the transaction checks the files after its commit; the commit hook checks
// them before it.
type checkedAtCommit struct{}

type guardedTx struct {
	driver.Tx
	g *guard
}

// Commit says why when the commit hook refused the commit: SQLite's own
// error would only say that a constraint failed.
func (t *guardedTx) Commit() error {
	err := t.Tx.Commit()
	if err != nil {
		if lost := t.g.last(); lost != nil {
			return lost
		}
	}
	return err
}

// headerSize is the length of a SQLite database header.
const headerSize = 100

// sqliteMagic opens every SQLite database file.
const sqliteMagic = "SQLite format 3\x00"

// headerEvery is how often, at most, check reads the database's header:
// the checkpointer's tick checks every 100ms, so an overwrite is seen
// within that, and a burst of commits reads it once.
const headerEvery = 20 * time.Millisecond

// header is the part of a database header the guard compares.
type header struct {
	valid    bool   // it was read whole and is a SQLite database's
	pageSize uint32 // in bytes (1 in the file is 65536)
	write    byte   // file format write version: 2 in WAL mode
	read     byte   // file format read version: 2 in WAL mode
	counter  uint32 // file change counter
	pages    uint32 // in-header database size, in pages
	validFor uint32 // version-valid-for: the pages field counts when it equals counter
}

func parseHeader(b [headerSize]byte) header {
	be := func(i int) uint32 { return uint32(b[i])<<24 | uint32(b[i+1])<<16 | uint32(b[i+2])<<8 | uint32(b[i+3]) }
	h := header{valid: string(b[:16]) == sqliteMagic, write: b[18], read: b[19],
		counter: be(24), pages: be(28), validFor: be(92)}
	h.pageSize = uint32(b[16])<<8 | uint32(b[17])
	if h.pageSize == 1 {
		h.pageSize = 65536
	}
	return h
}

// overwrite reads the database's header through the guard's descriptor
// and says how the file was overwritten in place, or "" when nothing shows
// it was. It compares only what no inbox process, nor SQLite, changes in a
// database in WAL mode while it is open: the header is there and opens
// with SQLite's magic; the page size and the WAL format bytes stay; the
// change counter, which each commit of page 1 raises and checkpoints copy
// in commit order, never goes down (an older copy written over it); and
// the file never shrinks (no inbox process vacuums it, and SQLite
// shrinks a database in WAL mode only after a VACUUM), neither its size
// nor its header's page count. A file shorter than its header's page count
// is no sign: a checkpoint writes page 1 before the pages past the old end,
// and one that meets a full disk leaves it so until the next succeeds. A header read twice differently is being written: nothing
// is concluded from it this time. Before the file first holds a whole
// header in WAL mode (a database being created, or switched to WAL)
// nothing is compared. size is the
// file's size as stat saw it; g.mu is held.
func (g *guard) overwrite(size int64) string {
	var a, b [headerSize]byte
	na, _ := g.db.ReadAt(a[:], 0)
	nb, _ := g.db.ReadAt(b[:], 0)
	if na != nb || a != b {
		return ""
	}
	h := parseHeader(a)
	was := g.head
	if !was.valid {
		// From the first whole header in WAL mode: an older database is
		// switched to WAL after the guard first reads it.
		if na == headerSize && h.valid && h.write == 2 && h.read == 2 {
			g.head, g.size = h, size
		}
		return ""
	}
	switch {
	case na < headerSize:
		return fmt.Sprintf("it is %d bytes long, shorter than a database header", na)
	case !h.valid:
		return "its first bytes are no SQLite database's"
	case h.pageSize != was.pageSize:
		return fmt.Sprintf("its page size went from %d to %d bytes", was.pageSize, h.pageSize)
	case h.write != was.write || h.read != was.read:
		return fmt.Sprintf("its file format bytes went from %d,%d to %d,%d (another journal mode: a copy)", was.write, was.read, h.write, h.read)
	case h.counter < was.counter:
		return fmt.Sprintf("its change counter went back from %d to %d (an older copy)", was.counter, h.counter)
	case size < g.size || (h.counter == h.validFor && was.counter == was.validFor && h.pages < was.pages):
		return fmt.Sprintf("it shrank from %d to %d bytes (an older or another copy)", g.size, size)
	}
	g.head, g.size = h, size
	return ""
}
