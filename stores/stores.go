// Package stores opens the store a --db names: a postgres:// or
// postgresql:// URL is PostgreSQL, anything else the path of a SQLite
// file. It is the one place that knows every store, and says how a --db
// is shown in logs and what of it an --exec command must not see.
package stores

import (
	"cmp"
	"context"
	"errors"
	"regexp"
	"strings"
	"time"

	"inbox/dbaddr"
	"inbox/deploy"
	"inbox/inbox"
	"inbox/pending"
	"inbox/postgres"
	"inbox/replica"
	"inbox/sqlite"
)

// Options are what a command asks of the store --db names.
type Options struct {
	// ReadOnly opens it for reading only; MustExist refuses to create one.
	ReadOnly, MustExist bool
	// Schema is applied at open (SQLite): serve's and dispatch's.
	Schema string
	// BusyTimeout bounds a write's wait for another's lock.
	BusyTimeout time.Duration
	// OnCommit and OnFileLost are the store's observers (see sqlite.Options).
	OnCommit   func(inbox.Commit)
	OnFileLost func(error)
	// Wait (serve and dispatch) opens a PostgreSQL store in the background
	// (see pending): the store is returned at once, fails every operation
	// until its database answers, and then connects, migrates and checks
	// as the open would have. OnDown and OnFatal observe it (see
	// pending.Options).
	Wait            bool
	OnDown, OnFatal func(error)
	// PG is what the --db-* flags set: PostgreSQL's pool and durability checks.
	PG PG
	// Replica, when set, replicates a SQLite store as it is written (serve
	// --replica): the store runs no checkpoint of its own, the Replicator
	// runs them. PostgreSQL refuses it.
	Replica *replica.Config
}

// PG are the PostgreSQL store's settings a writing command takes.
type PG struct {
	MaxConns      int  // 0: postgres.DefaultMaxConns
	Writers       int  // 0: postgres.DefaultWriters
	UnsafeNoFsync bool // see postgres.Options.UnsafeNoFsync
}

// IsPostgres reports whether db is a PostgreSQL URL rather than a path.
func IsPostgres(db string) bool { return dbaddr.IsPostgres(db) }

// keywordValue matches a libpq connection string in its keyword=value form
// ("host=db user=inbox password=..."): one of libpq's keywords at the start
// or after a space, then "=".
var keywordValue = regexp.MustCompile(`(?:^|\s)(?:host|hostaddr|port|dbname|user|password|passfile|service|` +
	`sslmode|sslcert|sslkey|sslpassword|sslrootcert|sslcrl|sslcrldir|sslsni|sslcertmode|requiressl|` +
	`require_auth|channel_binding|connect_timeout|client_encoding|options|application_name|` +
	`fallback_application_name|keepalives|keepalives_idle|keepalives_interval|keepalives_count|` +
	`tcp_user_timeout|replication|gssencmode|gsslib|gssdelegation|krbsrvname|requirepeer|` +
	`target_session_attrs|load_balance_hosts|ssl_min_protocol_version|ssl_max_protocol_version)\s*=`)

// CheckKeywordValue refuses a db that reads as a PostgreSQL connection
// string in libpq's keyword=value form, which would otherwise be taken
// for a SQLite path: a file named with its password, the password logged
// as the path. The error does not repeat db.
func CheckKeywordValue(db string) error {
	if IsPostgres(db) || !keywordValue.MatchString(db) {
		return nil
	}
	return errors.New("--db (or INBOX_DB) looks like a PostgreSQL keyword=value connection string: give a postgres:// URL (postgres://user:password@host:port/dbname?sslmode=...)")
}

// Open opens the store db names: a postgres:// or postgresql:// URL
// is PostgreSQL, anything else the path of a SQLite file. It is the one
// place that knows every store. It fails as the store's Open does, with
// the error on one line, and refuses a URL that holds the shipped
// placeholder password and a PostgreSQL keyword=value connection string
// (CheckKeywordValue), before it creates or logs anything. With o.Wait, a PostgreSQL store is opened in the
// background: Open waits for the first attempt at most startWait, and
// fails only on what the URL or a server that answered by then refuses.
func Open(ctx context.Context, db string, o Options) (inbox.Store, error) {
	if err := CheckKeywordValue(db); err != nil {
		return nil, err
	}
	if IsPostgres(db) && deploy.Placeholder(db) {
		return nil, errors.New("INBOX_DB (or --db) holds the placeholder password of the shipped inbox-postgres.env: set it to the inbox role's password")
	}
	if !IsPostgres(db) {
		replicated := o.Replica != nil && !o.ReadOnly
		s, err := sqlite.Open(ctx, db, sqlite.Options{
			Schema:        o.Schema,
			ReadOnly:      o.ReadOnly,
			MustExist:     o.MustExist,
			BusyTimeout:   o.BusyTimeout,
			OnCommit:      o.OnCommit,
			OnFileLost:    o.OnFileLost,
			NoCheckpoints: replicated,
		})
		if err != nil {
			return nil, err // not a nil *sqlite.Store in a non-nil interface
		}
		if !replicated {
			return s, nil
		}
		r, err := replica.Open(ctx, db, *o.Replica)
		if err != nil {
			s.Close()
			return nil, err
		}
		return replica.Wrap(s, r), nil
	}
	if o.Replica != nil {
		return nil, errors.New("--replica applies to a SQLite file only: PostgreSQL keeps its copies with its own replication and backups (see docs/postgres.md)")
	}
	open := func(ctx context.Context) (inbox.Store, error) {
		s, err := postgres.Open(ctx, db, postgres.Options{
			ReadOnly:      o.ReadOnly,
			BusyTimeout:   o.BusyTimeout,
			MaxConns:      o.PG.MaxConns,
			Writers:       o.PG.Writers,
			UnsafeNoFsync: o.PG.UnsafeNoFsync,
			OnCommit:      o.OnCommit,
		})
		if err != nil {
			return nil, OneLine{err}
		}
		return s, nil
	}
	if !o.Wait {
		return open(ctx)
	}
	// A URL that cannot work is refused at once, before anything waits.
	if err := postgres.CheckURL(db); err != nil {
		return nil, err
	}
	s := pending.Open(ctx, pending.Options{Open: open, Transient: postgres.Unreachable,
		Wait: cmp.Or(o.BusyTimeout, inbox.DefaultBusyTimeout), OnDown: o.OnDown, OnFatal: o.OnFatal})
	select {
	case <-s.Settled():
	case <-time.After(startWait):
	}
	if err := s.Err(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// startWait bounds how long a store opened in the background is waited for
// before Open returns: a database that answers has answered by then
// (the store is open before anything is served, or what the server refuses
// stops the start at once), and one that hangs still leaves serve's ports
// answering within a second.
const startWait = 500 * time.Millisecond

// OneLine is an error whose text is kept on one line, as main prints
// errors: the driver's connection errors list each address tried on a line
// of its own.
type OneLine struct{ Err error }

func (e OneLine) Error() string {
	return strings.Join(strings.Fields(strings.ReplaceAll(e.Err.Error(), "\n", "; ")), " ")
}

func (e OneLine) Unwrap() error { return e.Err }

// Describe is db as logs show it: a SQLite path as given; for a
// PostgreSQL URL only "postgres", since no log line names the database's
// address, user or password.
func Describe(db string) string {
	if IsPostgres(db) {
		return "postgres"
	}
	return db
}
