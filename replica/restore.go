package replica

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/benbjohnson/litestream"
)

// ErrEmpty is what Restore returns when the replica holds no database (yet).
var ErrEmpty = errors.New("the replica holds no database")

// Restore writes the database the replica holds to path, as of at when it
// is not zero (the latest otherwise), checks it with integrity_check and
// with check (inbox's schema check; nil skips it), and only then gives it
// its name. It refuses a path that exists, and never replaces one that
// appears meanwhile. Nothing is left at path when it fails. It fails with
// ErrEmpty when the replica holds no database, or none as early as at.
func Restore(ctx context.Context, cfg Config, path string, at time.Time, check func(ctx context.Context, path string) error) error {
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("%s exists: restore never replaces a file; give --to a path that does not exist (or move the file away first)", path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("restore: %w", err)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if _, err := os.Lstat(path + suffix); err == nil {
			return fmt.Errorf("%s%s exists: a database was removed from %s while in use; move its -wal and -shm away before restoring there", path, suffix, path)
		}
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	staging, err := os.MkdirTemp(dir, "."+filepath.Base(path)+".restore-*")
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	defer os.RemoveAll(staging)
	tmp := filepath.Join(staging, filepath.Base(path))

	if err := cfg.Client.Init(ctx); err != nil {
		return fmt.Errorf("restore from %s: %s", cfg.Shown, scrub(err, cfg.Secrets))
	}
	r := litestream.NewReplicaWithClient(nil, cfg.Client)
	cfg.Client.SetLogger(slog.New(slog.DiscardHandler))
	opt := litestream.NewRestoreOptions()
	opt.OutputPath = tmp
	opt.Timestamp = at
	// Checked below rather than by Litestream, which logs its result.
	opt.IntegrityCheck = litestream.IntegrityCheckNone
	if err := r.Restore(ctx, opt); err != nil {
		if errors.Is(err, litestream.ErrTxNotAvailable) || errors.Is(err, litestream.ErrNoSnapshots) {
			if !at.IsZero() {
				return fmt.Errorf("restore from %s: %w as early as %s (its history goes back as far as its retention)", cfg.Shown, ErrEmpty, at.UTC().Format(time.RFC3339))
			}
			return fmt.Errorf("restore from %s: %w", cfg.Shown, ErrEmpty)
		}
		return fmt.Errorf("restore from %s: %s", cfg.Shown, scrub(err, cfg.Secrets))
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := integrity(ctx, tmp); err != nil {
		return fmt.Errorf("restore from %s: %w", cfg.Shown, err)
	}
	if check != nil {
		if err := check(ctx, tmp); err != nil {
			return fmt.Errorf("restore from %s: the copy fails inbox's check: %w", cfg.Shown, err)
		}
	}
	// The checks only read it: a -wal they left is empty.
	if fi, err := os.Stat(tmp + "-wal"); err == nil && fi.Size() > 0 {
		return fmt.Errorf("restore: the checks left a -wal of %d bytes", fi.Size())
	}
	os.Remove(tmp + "-wal")
	os.Remove(tmp + "-shm")
	// A link, not a rename: it fails rather than replace a file that
	// appeared at path since the check above.
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s appeared while restoring: restore never replaces a file", path)
		}
		return fmt.Errorf("restore: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// integrity runs PRAGMA integrity_check on the database at path.
func integrity(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return fmt.Errorf("integrity_check: %w", err)
	}
	defer db.Close()
	var got string
	if err := db.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&got); err != nil {
		return fmt.Errorf("integrity_check: %w", err)
	}
	if got != "ok" {
		return fmt.Errorf("the copy fails integrity_check: %s", got)
	}
	return nil
}

// Holds reports whether the replica holds a database: any LTX file, at
// the first level or the snapshots'. It fails when the replica cannot be
// read.
func Holds(ctx context.Context, cfg Config) (bool, error) {
	if err := cfg.Client.Init(ctx); err != nil {
		return false, fmt.Errorf("read replica %s: %s", cfg.Shown, scrub(err, cfg.Secrets))
	}
	for _, level := range []int{0, litestream.SnapshotLevel} {
		itr, err := cfg.Client.LTXFiles(ctx, level, 0, false)
		if err != nil {
			return false, fmt.Errorf("read replica %s: %s", cfg.Shown, scrub(err, cfg.Secrets))
		}
		found := itr.Next()
		err = itr.Err()
		itr.Close()
		if err != nil {
			return false, fmt.Errorf("read replica %s: %s", cfg.Shown, scrub(err, cfg.Secrets))
		}
		if found {
			return true, nil
		}
	}
	return false, nil
}

// RestoreIfMissing restores the database at db from the replica cfg when
// there is no file there and restore is set (serve --restore-if-missing,
// on a new machine), checking it with check. An empty replica is no
// error: serve then starts an empty inbox.
//
// Without restore it refuses to start an empty database over a replica
// that holds one: the empty file would become the replica's latest state.
//
// With no file at db it must read the replica, so a replica that cannot be
// read then fails it, restore or not: an empty inbox started blind could
// overwrite the replica's history. With a file at db it reads nothing: the
// Replicator catches up once the replica answers.
func RestoreIfMissing(ctx context.Context, cfg Config, db string, restore bool, check func(ctx context.Context, path string) error) error {
	if _, err := os.Lstat(db); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("--restore-if-missing: %w", err)
	}
	if !restore {
		holds, err := Holds(ctx, cfg)
		if err != nil {
			return fmt.Errorf("no database at %s, and the replica cannot be read to check that it holds none (an empty inbox started now could overwrite its history): start serve again once the replica answers: %w", db, err)
		}
		if holds {
			return fmt.Errorf("no database at %s, but replica %s holds one: add --restore-if-missing to restore it first (or run inbox restore), or give --replica an empty place to start a new inbox", db, cfg.Shown)
		}
		return nil
	}
	err := Restore(ctx, cfg, db, time.Time{}, check)
	if errors.Is(err, ErrEmpty) {
		cfg.Log.Info().Str("db", db).Str("replica", cfg.Shown).Msg("no database at --db and none on the replica: starting an empty inbox")
		return nil
	}
	if err != nil {
		return fmt.Errorf("--restore-if-missing: no database at %s, and it could not be restored, so serve does not start (an empty inbox could overwrite the replica's history): %w", db, err)
	}
	cfg.Log.Info().Str("db", db).Str("replica", cfg.Shown).Msg("no database at --db: restored it from the replica")
	return nil
}
