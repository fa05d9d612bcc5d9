package sqlite

import (
	"context"
	"time"
)

// checkpointEvery is how often the checkpointer copies committed WAL pages
// into the database file.
const checkpointEvery = 100 * time.Millisecond

// writerCheckpointFrames is the write connection's wal_autocheckpoint: the
// WAL's length, in frames, past which the writer's own commit runs a
// checkpoint and the WAL starts over. It is SQLite's default, 1,000 (about
// 4 MiB), set here so that a test holds it. A larger one takes most
// checkpoints out of the writer's commits (at 10,000: 22, 90 and 33
// commits over 2 ms in 2 s of a loaded run against 87, 73 and 59, and no
// rate measurable with the machine otherwise idle), and lets the -wal
// file grow to 40 MiB and stay there: on a disk with little room the WAL
// alone then fills it, and freeing space no longer ends the outage
// (TestOutageDiskFull, in 32 MiB, failed so under load).
const writerCheckpointFrames = 1_000

// runCheckpointer copies committed pages from the WAL into the database on
// its own connection until Close. SQLite would otherwise do all of it inside
// the writer's commits, stalling every delivery waiting behind them. A
// PASSIVE checkpoint never takes the write lock, so it runs beside the
// writer; the writer's own automatic checkpoint stays on (at
// writerCheckpointFrames) and then finds little left to copy, and it is the
// one that lets the WAL start over from the beginning: under load a commit
// lands during nearly every one of the checkpointer's, which therefore
// rarely ends with every frame copied. With Options.NoCheckpoints it only
// watches the file.
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
			if s.noCheckpoints {
				continue
			}
			// An error (say, a full disk) is left for the writer to meet
			// and answer with 503; the next tick tries again.
			s.ckpt.ExecContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)")
		}
	}
}
