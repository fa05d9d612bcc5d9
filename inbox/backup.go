package inbox

import (
	"context"
	"fmt"
)

// Backup writes a consistent copy of the database to path with VACUUM INTO,
// which reads one snapshot: a serve running meanwhile keeps committing, and
// the copy holds exactly what was committed when the backup began. path must
// not exist or be an empty file. The copy is not fsynced; the caller does
// that. It fails when the database cannot be read or path cannot be written.
func (s *Store) Backup(ctx context.Context, path string) error {
	// A connection of its own: the read pool is query_only, which refuses
	// VACUUM INTO even though the source is only read.
	db, err := openPool(s.path, busyDSN(s.busy).Encode(), 1)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, path); err != nil {
		return fmt.Errorf("backup to %s: %w", path, err)
	}
	return db.Close()
}
