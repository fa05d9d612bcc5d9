package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

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
type guard struct {
	mu    sync.Mutex
	files []watchedFile
	lost  error // the last check's verdict
	// onChange is called, under mu so calls keep their order, when the
	// verdict changes: with the error when a file is lost, nil when it is
	// back.
	onChange func(error)
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

// check stats every watched path and returns an error wrapping ErrFileLost
// when one no longer names the file it named when watched. A nil guard
// checks nothing.
func (g *guard) check() error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var err error
	for _, f := range g.files {
		fi, serr := os.Stat(f.path)
		switch {
		case errors.Is(serr, fs.ErrNotExist):
			err = fmt.Errorf("%w: %s (%s) was removed or renamed", ErrFileLost, f.path, f.what)
		case serr != nil:
			err = fmt.Errorf("%w: %s (%s): %w", ErrFileLost, f.path, f.what, serr)
		case !os.SameFile(fi, f.fi):
			err = fmt.Errorf("%w: %s (%s) is another file now: it was replaced", ErrFileLost, f.path, f.what)
		}
		if err != nil {
			break
		}
	}
	if (err == nil) != (g.lost == nil) && g.onChange != nil {
		g.onChange(err)
	}
	g.lost = err
	return err
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

// ExecContext runs a statement from its text, counted in parsed.
func (c *guardedConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	if c.parsed != nil {
		c.parsed.n.Add(1)
	}
	return c.sqliteConn.ExecContext(ctx, q, args)
}

// QueryContext runs a query from its text, counted in parsed.
func (c *guardedConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	if c.parsed != nil {
		c.parsed.n.Add(1)
	}
	return c.sqliteConn.QueryContext(ctx, q, args)
}

// Unwrap returns the driver's connection (sqlite.Limit looks through
// wrappers this way).
func (c *guardedConn) Unwrap() driver.Conn { return c.sqliteConn }

func (c *guardedConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

// BeginTx refuses to begin once a file is lost, and checks again once the
// BEGIN has its lock: it may have waited for it while the file went.
func (c *guardedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if err := c.g.check(); err != nil {
		return nil, err
	}
	tx, err := c.sqliteConn.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	if err := c.g.check(); err != nil {
		tx.Rollback()
		return nil, err
	}
	return &guardedTx{Tx: tx, g: c.g}, nil
}

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
