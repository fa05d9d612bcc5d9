package inbox

import (
	"context"
	"fmt"
)

// Backup writes a consistent copy of the database to path with VACUUM INTO
// and checks it. VACUUM INTO reads one snapshot, so a serve running
// meanwhile keeps committing and the copy holds exactly what was committed
// when the backup began; the copy is compacted, in rollback-journal mode
// (serve turns WAL back on when it opens it). path must not exist or be an
// empty file. The copy is not fsynced: the caller does that. It returns the
// number of rows in the copy, and fails when the database cannot be read,
// path cannot be written, or the copy does not pass integrity_check.
func (s *Store) Backup(ctx context.Context, path string) (int64, error) {
	// A connection of its own: the read pool is query_only, which refuses
	// VACUUM INTO even though the source is only read.
	db, err := openPool(s.path, busyDSN(s.busy).Encode(), 1, nil)
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
