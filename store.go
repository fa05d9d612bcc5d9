package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"inbox/admin"
	"inbox/config"
	"inbox/dbaddr"
	"inbox/inbox"
	"inbox/postgres"
	"inbox/process"
	"inbox/sqlite"
	"inbox/stores"
)

//go:embed schema.sql
var schema string

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
func parsePGOptions(c *cli.Context, db string) (stores.PG, error) {
	if err := stores.CheckKeywordValue(db); err != nil {
		return stores.PG{}, err
	}
	o := stores.PG{MaxConns: c.Int("db-max-conns"), Writers: c.Int("db-writers"), UnsafeNoFsync: c.Bool("db-unsafe-no-fsync")}
	if !stores.IsPostgres(db) {
		for _, name := range []string{"db-max-conns", "db-writers", "db-unsafe-no-fsync"} {
			if c.IsSet(name) {
				return stores.PG{}, fmt.Errorf("--%s (or INBOX_%s) applies to PostgreSQL only, and --db is a SQLite file (which writes through one connection, fsynced): unset it", name, strings.ToUpper(strings.ReplaceAll(name, "-", "_")))
			}
		}
		return stores.PG{}, nil
	}
	if o.MaxConns < postgres.MinMaxConns {
		return stores.PG{}, fmt.Errorf("--db-max-conns %d: want at least %d (the writer holds one connection through each commit, and the rest of the store needs another)", o.MaxConns, postgres.MinMaxConns)
	}
	if o.Writers < 1 || o.Writers >= o.MaxConns {
		return stores.PG{}, fmt.Errorf("--db-writers %d: want at least 1 and fewer than --db-max-conns (%d): each writer holds a connection through its commits, and the rest of the store needs another", o.Writers, o.MaxConns)
	}
	return o, nil
}

// adminOpener is how the operator's commands open the store --db names:
// never creating one, read-only unless they write. A command that writes
// upgrades a database an earlier inbox made, with serve's schema, as serve
// does; a read-only one refuses it, saying to run inbox migrate.
func adminOpener(ctx context.Context, db string, a admin.Access) (inbox.Store, error) {
	if err := config.Work(ctx); err != nil {
		return nil, err
	}
	return stores.Open(ctx, db, stores.Options{Schema: schema, ReadOnly: !a.Write, MustExist: true, BusyTimeout: a.BusyTimeout})
}

// storeOpener is a run's Open of the store db names with o, its observers
// the run's.
func storeOpener(db string, o stores.Options) func(context.Context, process.StoreObservers) (inbox.Store, error) {
	return func(ctx context.Context, obs process.StoreObservers) (inbox.Store, error) {
		o.OnCommit, o.OnFileLost, o.OnDown, o.OnFatal = obs.OnCommit, obs.OnFileLost, obs.OnDown, obs.OnFatal
		return stores.Open(ctx, db, o)
	}
}

// runError is how serve or dispatch, run on the store db, ends with err:
// on one line, as main prints errors, and naming none of a PostgreSQL
// database's address, as their logs do (dbaddr.ForLogs): a role or a
// database the server refused at start stops them with this line. nil
// stays nil.
func runError(db string, err error) error {
	if err == nil {
		return nil
	}
	return errors.New(dbaddr.ForLogs(db)(stores.OneLine{Err: err}))
}

// backupFile is how inbox migrate copies a SQLite file before it upgrades
// it: as it is, waiting up to the default busy timeout for serve's lock.
func backupFile(ctx context.Context, db, path string) (int64, error) {
	return sqlite.BackupFile(ctx, db, path, inbox.DefaultBusyTimeout)
}
