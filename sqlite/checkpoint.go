package sqlite

import (
	"context"
	"time"
)

// checkpointEvery is how often the checkpointer copies committed WAL pages
// into the database file.
const checkpointEvery = 100 * time.Millisecond

// runCheckpointer copies committed pages from the WAL into the database on
// its own connection until Close. SQLite would otherwise do all of it inside
// the writer's commit once the WAL passes 1,000 pages, stalling every
// delivery waiting behind that commit. A PASSIVE checkpoint never takes the
// write lock, so it runs beside the writer; the writer's own automatic
// checkpoint stays on and then finds little left to copy, and it is the one
// that lets the WAL start over from the beginning.
func (s *Store) runCheckpointer() {
	defer s.stopped.Done()
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	for {
		select {
		case <-s.closing:
			return
		case <-t.C:
			// Notices a lost database file within a tick, deliveries or
			// not (the guard reports it through OnFileLost). The
			// checkpoint goes on regardless: it writes through the file
			// SQLite has open, which is all that is left of the rows
			// committed before.
			s.guard.check()
			// An error (say, a full disk) is left for the writer to meet
			// and answer with 503; the next tick tries again.
			s.ckpt.ExecContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)")
		}
	}
}
