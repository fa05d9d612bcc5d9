package admin

import (
	"context"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/config"
	"inbox/dbaddr"
)

// FileBackup writes a checked, consistent copy of the SQLite database at
// db to path as it is, without upgrading it, and returns the rows copied
// (sqlite.BackupFile).
type FileBackup func(ctx context.Context, db, path string) (int64, error)

func migrateCommand(open Opener, backup FileBackup) *cli.Command {
	return &cli.Command{
		Name:  "migrate",
		Usage: "upgrade a database an earlier inbox made to this inbox's schema",
		Description: `Upgrades the database --db names to the schema this inbox reads and writes,
as serve and dispatch do when they start, and as every command that writes
does (pause, resume, reprocess, purge, expect, ...): on SQLite it adds the
tables and columns an earlier version lacked and gives the rows stored
before destinations their state as destination default's; on PostgreSQL it
applies the migrations the schema lacks (which needs CREATE on it). The
commands that only read (list, stats, parked, show, alert, missed,
expected, sources, backup) never upgrade: on an older database they fail,
saying to run this. It prints whether the database was upgraded or already
up to date. Safe while serve runs: the upgrade is one transaction, which
waits up to --busy-timeout for serve's lock. A database a newer inbox made
is refused. On SQLite, before it changes anything, it writes a consistent
copy of the database as it was beside it, named
<db>.before-migrate-<UTC time>.db, and says where: to go back, stop serve
and restore that file as inbox backup --help says.

Examples:
   inbox migrate --db /var/lib/inbox/inbox.db
   INBOX_DB='postgres://inbox:...@db.internal/inbox' inbox migrate`,
		Flags: []cli.Flag{config.DBFlag(), busyTimeoutFlag()},
		Action: func(c *cli.Context) error {
			if err := config.NoArgs(c); err != nil {
				return err
			}
			if store, err := openRead(c, open); err == nil {
				if err := store.Close(); err != nil {
					return err
				}
				fmt.Fprintln(c.App.Writer, "the database is up to date: nothing to do")
				return nil
			}
			if db := c.String("db"); backup != nil && !dbaddr.IsPostgres(db) {
				dest := fmt.Sprintf("%s.before-migrate-%s.db", db, time.Now().UTC().Format("20060102T150405Z"))
				rows, err := writeCopy(dest, false, func(tmp string) (int64, error) { return backup(c.Context, db, tmp) })
				if err != nil {
					return fmt.Errorf("migrate: the copy before the upgrade failed, nothing was changed: %w", err)
				}
				fmt.Fprintf(c.App.Writer, "copied the database as it was (%d rows) to %s\n", rows, dest)
			}
			store, err := openWrite(c, open)
			if err != nil {
				return err
			}
			if err := store.Close(); err != nil {
				return err
			}
			fmt.Fprintln(c.App.Writer, "upgraded the database to this inbox's schema")
			return nil
		},
	}
}
