package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"

	"inbox/inbox"
)

// probeKey is the events row Probe writes and undoes: no delivery makes a
// key with a space.
const probeKey = "inbox probe"

// Ping is Probe with nothing beyond the probe's own rows.
func (s *Store) Ping(ctx context.Context) error { return s.Probe(ctx, 0) }

// Probe reports whether the store can commit now what a delivery of size
// bytes (at most inbox.MaxProbeWrite) and the dispatcher's claim commit. It
// fails when a file the store opened is lost, and otherwise runs, through
// the writer and beside the deliveries waiting then, a transaction that
// inserts a row into events as a delivery does (the same prepared
// statement, the same indexes), claims it as the dispatcher does, settles
// it as an arrival as each batch does, undoes that in a savepoint, and commits the probe row and size bytes in
// probe_pad. An empty or undone transaction writes nothing, so it would
// pass through a full disk, an I/O error or a read-only file system that
// fails every delivery; and a disk that takes the probe's small row may
// still refuse a large delivery, hence the size. Its commit waits for
// another process's lock like a delivery's, up to the busy timeout, or
// until ctx is done. A read-only store only asks the file to answer.
func (s *Store) Probe(ctx context.Context, size int) error {
	if s.write == nil {
		return s.read.PingContext(ctx)
	}
	if err := s.guard.check(); err != nil {
		return fmt.Errorf("ping store: %w", err)
	}
	now := millis(s.now())
	size = min(max(size, 0), inbox.MaxProbeWrite)
	if err := s.roomFor(size); err != nil {
		return fmt.Errorf("ping store: %w", err)
	}
	probe := func(ctx context.Context, tx *sql.Tx) error {
		if err := probeEvents(ctx, &txStmts{ctx: ctx, tx: tx, st: s.stmts}, now); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO probe (id, at) VALUES (1, ?)
			ON CONFLICT(id) DO UPDATE SET at = excluded.at`, now); err != nil {
			return fmt.Errorf("write the probe: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO probe_pad (id, pad) VALUES (1, zeroblob(?))
			ON CONFLICT(id) DO UPDATE SET pad = excluded.pad`, size); err != nil {
			return fmt.Errorf("write the probe's %d bytes: %w", size, err)
		}
		return nil
	}
	if err := s.send(ctx, &write{Op: task{op: probe}, Probe: true}, false).Err; err != nil {
		return fmt.Errorf("ping store: %w", err)
	}
	return nil
}

// roomFor fails when the file system the database is on has fewer than
// size bytes free. A commit alone does not tell: one of size bytes may
// land where a delivery's would not, in the room the write-ahead log
// keeps once it starts over and in the pages the probe's last write freed,
// while a delivery's pages stay and the log fills again. A file system
// that cannot say how much is free is left to the commit.
func (s *Store) roomFor(size int) error {
	if size == 0 {
		return nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(s.path), &st); err != nil {
		return nil
	}
	if free := uint64(st.Bavail) * uint64(st.Bsize); free < uint64(size) {
		return fmt.Errorf("the database's file system has %d bytes free, fewer than the %d a delivery as large as the refused one needs with its pages", free, size)
	}
	return nil
}

// probeEvents inserts probeKey into events as a delivery, claims it as the
// dispatcher does, settles it as an arrival in refusals and expectations as
// each batch does, and undoes all three, inside st's transaction.
func probeEvents(ctx context.Context, st *txStmts, now int64) error {
	if _, err := st.tx.ExecContext(ctx, `SAVEPOINT probe_row`); err != nil {
		return fmt.Errorf("probe events: %w", err)
	}
	row := inbox.ProbeRow(probeKey, 0)
	_, err := insert(ctx, st.get(stmtInsert), row.Key, insertArgs(row, now))
	if err == nil {
		_, err = st.tx.ExecContext(ctx, `UPDATE events SET attempts = attempts + 1, lease_owner = 'probe',
			lease_until = ?, next_attempt_at = ? WHERE id = ?`, now, now, probeKey)
	}
	if err == nil {
		// A batch settles its arrivals too: the same statements, on the
		// probe's key as a job's.
		row.JobID = probeKey
		err = settleArrivals(ctx, st, slices.Values([]inbox.Delivery{row}), now)
	}
	if _, rerr := st.tx.ExecContext(ctx, `ROLLBACK TO probe_row`); rerr != nil && err == nil {
		err = rerr
	}
	if _, rerr := st.tx.ExecContext(ctx, `RELEASE probe_row`); rerr != nil && err == nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("probe events: %w", err)
	}
	return nil
}
