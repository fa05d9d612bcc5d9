package sqlite

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Backup writes a consistent copy of the database to path with VACUUM INTO
// and checks it. VACUUM INTO reads one snapshot, so a serve running
// meanwhile keeps committing and the copy holds exactly what was committed
// when the backup began; the copy is compacted, in rollback-journal mode
// (serve turns WAL back on when it opens it). path must not exist or be an
// empty file. The copy is not fsynced: the caller does that. It returns the
// number of rows in the copy, and fails when the database cannot be read,
// path cannot be written, path is one of the database's own files (see
// LiveFile), or the copy does not pass integrity_check.
func (s *Store) Backup(ctx context.Context, path string) (int64, error) {
	if what, err := LiveFile(s.path, path); err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	} else if what != "" {
		return 0, fmt.Errorf("backup: %s is %s: choose a path outside the live database's files", path, what)
	}
	return backupFile(ctx, s.path, path, s.busy)
}

// BackupFile writes a consistent copy of the SQLite database at db to
// path, as Store.Backup does, without opening it as a store: it neither
// checks nor upgrades the schema, so it copies a database an earlier
// inbox made as it is (inbox migrate's copy before the upgrade). busy
// bounds the wait for another's lock. It fails as Backup does, and when
// there is no database at db.
func BackupFile(ctx context.Context, db, path string, busy time.Duration) (int64, error) {
	if err := createFile(db, true); err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	if what, err := LiveFile(db, path); err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	} else if what != "" {
		return 0, fmt.Errorf("backup: %s is %s: choose a path outside the live database's files", path, what)
	}
	return backupFile(ctx, db, path, busy)
}

// backupFile copies the database at src to path with VACUUM INTO and
// checks the copy.
func backupFile(ctx context.Context, src, path string, busy time.Duration) (int64, error) {
	// A connection of its own: the read pool is query_only, which refuses
	// VACUUM INTO even though the source is only read.
	db, err := openPool(src, busyDSN(busy).Encode(), 1, nil, nil)
	if err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `VACUUM INTO ?`, path); err != nil {
		return 0, fmt.Errorf("backup to %s: %w", path, err)
	}
	if _, err := conn.ExecContext(ctx, `ATTACH DATABASE ? AS copy`, path); err != nil {
		return 0, fmt.Errorf("check backup %s: %w", path, err)
	}
	defer conn.ExecContext(context.Background(), `DETACH DATABASE copy`)
	var integrity string
	if err := conn.QueryRowContext(ctx, `PRAGMA copy.integrity_check`).Scan(&integrity); err != nil {
		return 0, fmt.Errorf("check backup %s: %w", path, err)
	}
	if integrity != "ok" {
		return 0, fmt.Errorf("check backup %s: integrity_check says %q", path, integrity)
	}
	var rows int64
	if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM copy.events`).Scan(&rows); err != nil {
		return 0, fmt.Errorf("check backup %s: %w", path, err)
	}
	return rows, nil
}

// LiveFile says what target is of the store's own files (see LiveFile):
// "the live database", "the live database's -wal file", or "" when it is
// none of them.
func (s *Store) LiveFile(target string) (string, error) { return LiveFile(s.path, target) }

// liveSuffixes are the files SQLite keeps beside a database, named after
// it: writing any of them under a running process corrupts the database.
var liveSuffixes = []string{"", "-wal", "-shm", "-journal"}

// LiveFile reports whether target is one of the live database's files at
// db: the database itself, its -wal, -shm or -journal, however target
// spells it (a symbolic link, a hard link, another path to the folder,
// such as one through a linked folder or with ".."). It returns what
// target is ("the live database", "the live database's -wal") or "" when
// it is none of them, or when there is no database at db. SQLite names the
// -wal and -shm after the database's real path, links resolved, so that is
// the path compared. It fails when db or target's folder cannot be looked
// at, or when db has more than one hard link (see oneName): then no name's
// -wal is surely the live one.
func LiveFile(db, target string) (string, error) {
	real, err := filepath.EvalSymlinks(db)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	} else if err != nil {
		return "", err
	}
	// Under another name SQLite would look for another -wal: which files
	// are live depends on the name each process opened (see oneName).
	if err := oneName(real); err != nil {
		return "", err
	}
	// The same file, whatever its name: the target exists and is (or links
	// to) one of the database's files as they are now.
	if tfi, err := os.Stat(target); err == nil {
		for _, suffix := range liveSuffixes {
			if fi, err := os.Stat(real + suffix); err == nil && os.SameFile(fi, tfi) {
				return describe(suffix), nil
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	// The same name in the same folder: the file need not exist yet (no
	// -wal while nothing has the database open), and a rename onto that
	// name would make it one.
	dbDir, err := os.Stat(filepath.Dir(real))
	if err != nil {
		return "", err
	}
	tdir, err := os.Stat(filepath.Dir(target))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil // nothing can be written there
	} else if err != nil {
		return "", err
	}
	if os.SameFile(dbDir, tdir) {
		for _, suffix := range liveSuffixes {
			if filepath.Base(target) == filepath.Base(real)+suffix {
				return describe(suffix), nil
			}
		}
	}
	return "", nil
}

func describe(suffix string) string {
	if suffix == "" {
		return "the live database"
	}
	return "the live database's " + suffix + " file"
}
