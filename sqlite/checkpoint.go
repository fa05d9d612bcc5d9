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
// checkpoint. SQLite's default, 1,000, is about 50 ms of commits under
// load (two frames a row), half a tick of the checkpointer: the writer then
// made most of the checkpoints, each inside a commit that every delivery of
// its batch waits for (two fsyncs and the pages' copies). At 10,000 frames
// (40 MiB of 4 KiB pages) the checkpointer has copied all but the last
// tick's pages by the time the writer's turn comes, and the writer's
// checkpoint, which copies those and lets the WAL start over, comes ten
// times less often. It also bounds the WAL when the checkpointer falls
// behind. Durability is the same: a commit is in the WAL, fsynced, before
// any checkpoint copies it.
const writerCheckpointFrames = 10_000

// runCheckpointer copies committed pages from the WAL into the database on
// its own connection until Close. SQLite would otherwise do all of it inside
// the writer's commits, stalling every delivery waiting behind them. A
// PASSIVE checkpoint never takes the write lock, so it runs beside the
// writer; the writer's own automatic checkpoint stays on (at
// writerCheckpointFrames) and then finds little left to copy, and it is the
// one that lets the WAL start over from the beginning: under load a commit
// lands during nearly every one of the checkpointer's, which therefore
// rarely ends with every frame copied.
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
