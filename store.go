package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/admin"
	"inbox/deploy"
	"inbox/inbox"
	"inbox/pending"
	"inbox/postgres"
	"inbox/sqlite"
)

// storeOptions are what a command asks of the store --db names.
type storeOptions struct {
	// readOnly opens it for reading only; mustExist refuses to create one.
	readOnly, mustExist bool
	// schema is applied at open (SQLite): serve's and dispatch's.
	schema string
	// busyTimeout bounds a write's wait for another's lock.
	busyTimeout time.Duration
	// onCommit and onFileLost are the store's observers (see sqlite.Options).
	onCommit   func(inbox.Commit)
	onFileLost func(error)
	// wait (serve and dispatch) opens a PostgreSQL store in the background
	// (see pending): the store is returned at once, fails every operation
	// until its database answers, and then connects, migrates and checks
	// as the open would have. onDown and onFatal observe it (see
	// pending.Options).
	wait            bool
	onDown, onFatal func(error)
	// pg is what dbWriteFlags set: PostgreSQL's pool and durability checks.
	pg pgOptions
}

// pgOptions are the PostgreSQL store's settings a writing command takes.
type pgOptions struct {
	maxConns      int  // 0: postgres.DefaultMaxConns
	writers       int  // 0: postgres.DefaultWriters
	unsafeNoFsync bool // see postgres.Options.UnsafeNoFsync
}

// dbWriteFlags are the flags of the commands that open PostgreSQL for
// writing for long (serve, dispatch).
func dbWriteFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "db-max-conns", Value: postgres.DefaultMaxConns, Usage: fmt.Sprintf("PostgreSQL only: the most connections this process holds to the database (at least %d: the writer holds one through each commit); mind the server's max_connections across every replica", postgres.MinMaxConns), EnvVars: []string{"INBOX_DB_MAX_CONNS"}},
		&cli.IntFlag{Name: "db-writers", Value: postgres.DefaultWriters, Usage: "PostgreSQL only: how many group commits of deliveries are in flight at once, each on a connection of its own (fewer than --db-max-conns), each batch beginning while the one before waits for its COMMIT; more pay where the server's WAL flush is slow (network storage), one costs the server least where it is fast", EnvVars: []string{"INBOX_DB_WRITERS"}},
		&cli.BoolFlag{Name: "db-unsafe-no-fsync", Usage: "PostgreSQL only, throwaway test servers only: accept a server with fsync or full_page_writes off, where a crash of the server loses rows already answered 204 (without it such a server is refused)", EnvVars: []string{"INBOX_DB_UNSAFE_NO_FSYNC"}},
	}
}

// parsePGOptions reads dbWriteFlags for the store db names, refusing them
// on SQLite, which has no pool and no such server settings.
func parsePGOptions(c *cli.Context, db string) (pgOptions, error) {
	if err := checkKeywordValue(db); err != nil {
		return pgOptions{}, err
	}
	o := pgOptions{maxConns: c.Int("db-max-conns"), writers: c.Int("db-writers"), unsafeNoFsync: c.Bool("db-unsafe-no-fsync")}
	if !isPostgres(db) {
		for _, name := range []string{"db-max-conns", "db-writers", "db-unsafe-no-fsync"} {
			if c.IsSet(name) {
				return pgOptions{}, fmt.Errorf("--%s (or INBOX_%s) applies to PostgreSQL only, and --db is a SQLite file (which writes through one connection, fsynced): unset it", name, strings.ToUpper(strings.ReplaceAll(name, "-", "_")))
			}
		}
		return pgOptions{}, nil
	}
	if o.maxConns < postgres.MinMaxConns {
		return pgOptions{}, fmt.Errorf("--db-max-conns %d: want at least %d (the writer holds one connection through each commit, and the rest of the store needs another)", o.maxConns, postgres.MinMaxConns)
	}
	if o.writers < 1 || o.writers >= o.maxConns {
		return pgOptions{}, fmt.Errorf("--db-writers %d: want at least 1 and fewer than --db-max-conns (%d): each writer holds a connection through its commits, and the rest of the store needs another", o.writers, o.maxConns)
	}
	return o, nil
}

// isPostgres reports whether db is a PostgreSQL URL rather than a path.
func isPostgres(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// keywordValue matches a libpq connection string in its keyword=value form
// ("host=db user=inbox password=..."): one of libpq's keywords at the start
// or after a space, then "=".
var keywordValue = regexp.MustCompile(`(?:^|\s)(?:host|hostaddr|port|dbname|user|password|passfile|service|` +
	`sslmode|sslcert|sslkey|sslpassword|sslrootcert|sslcrl|sslcrldir|sslsni|sslcertmode|requiressl|` +
	`require_auth|channel_binding|connect_timeout|client_encoding|options|application_name|` +
	`fallback_application_name|keepalives|keepalives_idle|keepalives_interval|keepalives_count|` +
	`tcp_user_timeout|replication|gssencmode|gsslib|gssdelegation|krbsrvname|requirepeer|` +
	`target_session_attrs|load_balance_hosts|ssl_min_protocol_version|ssl_max_protocol_version)\s*=`)

// checkKeywordValue refuses a db that reads as a PostgreSQL connection
// string in libpq's keyword=value form, which would otherwise be taken
// for a SQLite path: a file named with its password, the password logged
// as the path. The error does not repeat db.
func checkKeywordValue(db string) error {
	if isPostgres(db) || !keywordValue.MatchString(db) {
		return nil
	}
	return errors.New("--db (or INBOX_DB) looks like a PostgreSQL keyword=value connection string: give a postgres:// URL (postgres://user:password@host:port/dbname?sslmode=...)")
}

// openStore opens the store db names: a postgres:// or postgresql:// URL
// is PostgreSQL, anything else the path of a SQLite file. It is the one
// place that knows every store. It fails as the store's Open does, with
// the error on one line, and refuses a URL that holds the shipped
// placeholder password and a PostgreSQL keyword=value connection string
// (checkKeywordValue), before it creates or logs anything. With o.wait, a PostgreSQL store is opened in the
// background: openStore waits for the first attempt at most startWait, and
// fails only on what the URL or a server that answered by then refuses.
func openStore(ctx context.Context, db string, o storeOptions) (inbox.Store, error) {
	if err := checkKeywordValue(db); err != nil {
		return nil, err
	}
	if isPostgres(db) && deploy.Placeholder(db) {
		return nil, errors.New("INBOX_DB (or --db) holds the placeholder password of the shipped inbox-postgres.env: set it to the inbox role's password")
	}
	if !isPostgres(db) {
		s, err := sqlite.Open(ctx, db, sqlite.Options{
			Schema:      o.schema,
			ReadOnly:    o.readOnly,
			MustExist:   o.mustExist,
			BusyTimeout: o.busyTimeout,
			OnCommit:    o.onCommit,
			OnFileLost:  o.onFileLost,
		})
		if err != nil {
			return nil, err // not a nil *sqlite.Store in a non-nil interface
		}
		return s, nil
	}
	open := func(ctx context.Context) (inbox.Store, error) {
		s, err := postgres.Open(ctx, db, postgres.Options{
			ReadOnly:      o.readOnly,
			BusyTimeout:   o.busyTimeout,
			MaxConns:      o.pg.maxConns,
			Writers:       o.pg.writers,
			UnsafeNoFsync: o.pg.unsafeNoFsync,
			OnCommit:      o.onCommit,
		})
		if err != nil {
			return nil, oneLine{err}
		}
		return s, nil
	}
	if !o.wait {
		return open(ctx)
	}
	// A URL that cannot work is refused at once, before anything waits.
	if err := postgres.CheckURL(db); err != nil {
		return nil, err
	}
	s := pending.Open(ctx, pending.Options{Open: open, Transient: postgres.Unreachable,
		Wait: cmp.Or(o.busyTimeout, inbox.DefaultBusyTimeout), OnDown: o.onDown, OnFatal: o.onFatal})
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
// before openStore returns: a database that answers has answered by then
// (the store is open before anything is served, or what the server refuses
// stops the start at once), and one that hangs still leaves serve's ports
// answering within a second.
const startWait = 500 * time.Millisecond

// oneLine is an error whose text is kept on one line, as main prints
// errors: the driver's connection errors list each address tried on a line
// of its own.
type oneLine struct{ err error }

func (e oneLine) Error() string {
	return strings.Join(strings.Fields(strings.ReplaceAll(e.err.Error(), "\n", "; ")), " ")
}

func (e oneLine) Unwrap() error { return e.err }

// describeDB is db as logs show it: a SQLite path as given, a PostgreSQL
// URL without its password and query (which may hold one).
func describeDB(db string) string {
	if !isPostgres(db) {
		return db
	}
	db, _, _ = strings.Cut(db, "#")
	db, _, _ = strings.Cut(db, "?")
	if u, err := url.Parse(db); err == nil {
		return u.Redacted()
	}
	// A URL Go's parser refuses (several hosts, a stray escape) that the
	// driver may still take: mask what follows the user name by hand.
	scheme, rest, _ := strings.Cut(db, "://")
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return scheme + "://" + rest
	}
	user, _, hasPassword := strings.Cut(rest[:at], ":")
	if hasPassword {
		user += ":xxxxx"
	}
	return scheme + "://" + user + rest[at:]
}

// pgSecretEnv names the variables the PostgreSQL driver reads a secret
// from beside the URL: the password, and the TLS key's.
func pgSecretEnv() []string { return []string{"PGPASSWORD", "PGSSLPASSWORD"} }

// dbSecrets returns what of a PostgreSQL store an --exec command must not
// see: the URL's secrets (see urlSecrets), its sslpassword, and the values
// getenv gives for pgSecretEnv, which the driver takes when the URL has
// none; nothing for a SQLite path.
func dbSecrets(db string, getenv func(string) string) []string {
	if !isPostgres(db) {
		return nil
	}
	out := urlSecrets(db, false)
	if _, query, ok := strings.Cut(db, "?"); ok {
		if q, err := url.ParseQuery(query); err == nil && q.Get("sslpassword") != "" {
			out = append(out, q.Get("sslpassword"), db)
		}
	}
	for _, name := range pgSecretEnv() {
		if v := getenv(name); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// urlSecrets returns what of a URL an --exec command must not see: the URL
// itself and its password (in the user info or the query, as written and
// decoded) or, with userToken, the user when the user info has no password
// (a token, as nats://token@host has it); nothing for a URL without either.
func urlSecrets(raw string, userToken bool) []string {
	var out []string
	if _, query, ok := strings.Cut(raw, "?"); ok {
		if q, err := url.ParseQuery(query); err == nil && q.Get("password") != "" {
			out = append(out, q.Get("password"))
		}
	}
	_, rest, _ := strings.Cut(raw, "://")
	if at := strings.LastIndex(strings.SplitN(rest, "?", 2)[0], "@"); at >= 0 {
		user, pass, ok := strings.Cut(rest[:at], ":")
		if userToken && (!ok || pass == "") {
			pass = user
		}
		if pass != "" {
			out = append(out, pass)
			if dec, err := url.PathUnescape(pass); err == nil && dec != pass {
				out = append(out, dec)
			}
		}
	}
	if len(out) > 0 {
		out = append(out, raw)
	}
	return out
}

// adminOpener is how the operator's commands open the store --db names:
// never creating one, read-only unless they write. A command that writes
// upgrades a database an earlier inbox made, with serve's schema, as serve
// does; a read-only one refuses it, saying to run inbox migrate.
func adminOpener(ctx context.Context, db string, a admin.Access) (inbox.Store, error) {
	return openStore(ctx, db, storeOptions{schema: schema, readOnly: !a.Write, mustExist: true, busyTimeout: a.BusyTimeout})
}
