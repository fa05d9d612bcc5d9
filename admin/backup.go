package admin

import (
	"inbox/config"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"
)

func backupCommand(open Opener) *cli.Command {
	return &cli.Command{
		Name:      "backup",
		Usage:     "write a consistent copy of the database, while serve runs",
		ArgsUsage: "PATH",
		Description: `Copies the inbox to PATH with SQLite's VACUUM INTO: one snapshot, taken
while serve keeps committing, compacted. The copy is written beside PATH
under a temporary name, checked with integrity_check, fsynced and only then
renamed to PATH, so PATH is never a partial copy. An existing PATH is
refused unless --force. PATH may never be the live database or its -wal,
-shm or -journal file, however it is spelled (a link, another path to the
folder), --force or not. A database with a second name (a hard link) is
refused, as every command refuses it: SQLite finds the -wal by the name
opened. Prints the rows copied.

To restore: stop serve (never copy over the live file: serve would go on
writing into it), replace the database with the copy, delete the old
database's -wal and -shm files, start serve.

Examples:
   inbox backup /var/lib/inbox/backup/inbox-$(date +%F).db
   inbox backup --force /var/lib/inbox/backup/inbox.db`,
		Flags: []cli.Flag{
			config.DBFlag(),
			&cli.BoolFlag{Name: "force", Usage: "replace PATH if it exists", EnvVars: []string{"INBOX_BACKUP_FORCE"}},
			jsonFlag(),
		},
		Action: func(c *cli.Context) error {
			paths, err := args(c)
			if err != nil {
				return err
			}
			if len(paths) != 1 {
				return errors.New("backup needs one PATH to write the copy to")
			}
			dest := paths[0]
			force := c.Bool("force")
			opened, err := openRead(c, open)
			if err != nil {
				return err
			}
			defer opened.Close()
			store, ok := opened.(Backuper)
			if !ok {
				// Not the URL: it may hold the password.
				return errors.New("backup: --db is not a SQLite database: back up this store with its own tools (PostgreSQL: pg_dump)")
			}
			// Before the check for an existing PATH, whose error suggests
			// --force: over the live database that would corrupt it.
			if err := notLive(store, c.String("db"), dest); err != nil {
				return err
			}
			if _, err := os.Stat(dest); err == nil && !force {
				return fmt.Errorf("%s exists: use --force to replace it", dest)
			} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}

			rows, err := writeCopy(dest, force, func(tmp string) (int64, error) {
				rows, err := store.Backup(c.Context, tmp)
				if err != nil {
					return 0, err
				}
				// Again: PATH, or a folder on its way, may have changed
				// while the copy was made.
				return rows, notLive(store, c.String("db"), dest)
			})
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return json.NewEncoder(c.App.Writer).Encode(struct {
					Path string `json:"path"`
					Rows int64  `json:"rows"`
				}{dest, rows})
			}
			_, err = fmt.Fprintf(c.App.Writer, "copied %d rows to %s\n", rows, dest)
			return err
		},
	}
}

// writeCopy has write copy the database to a temporary file beside dest,
// fsyncs it and only then gives it the name dest (replacing a file there
// only when force), so dest is never a partial copy. It returns the rows
// write copied.
func writeCopy(dest string, force bool, write func(tmp string) (int64, error)) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".tmp-*")
	if err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	tmp.Close()
	// Until the rename, the copy is only the temporary file's.
	defer os.Remove(tmp.Name())
	rows, err := write(tmp.Name())
	if err != nil {
		return 0, err
	}
	if err := syncFile(tmp.Name()); err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	if force {
		err = os.Rename(tmp.Name(), dest)
	} else {
		// Link, not rename: it fails rather than replace a PATH that
		// appeared meanwhile.
		err = os.Link(tmp.Name(), dest)
	}
	if err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	if err := syncFile(filepath.Dir(dest)); err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	return rows, nil
}

// Backuper is a store that writes consistent copies of itself to files:
// the SQLite store. backup refuses a store that is not one.
type Backuper interface {
	// Backup writes a checked copy to path and returns the rows in it.
	Backup(ctx context.Context, path string) (int64, error)
	// LiveFile says what target is of the store's own files ("the live
	// database", "the live database's -wal file"), however it is spelled;
	// "" when it is none of them.
	LiveFile(target string) (string, error)
}

// notLive refuses a backup PATH that is one of the database's own files.
func notLive(store Backuper, db, dest string) error {
	what, err := store.LiveFile(dest)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if what != "" {
		return fmt.Errorf("backup: refusing to write %s: it is %s (--db %s); choose a PATH outside the database's files", dest, what, db)
	}
	return nil
}

// syncFile fsyncs a file or a directory, so what was written to it, or a
// name made in it, survives a crash.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
