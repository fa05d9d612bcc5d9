package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The PostgreSQL server's CPU time on a receiver's behalf: its backends
// and the server's own processes run on the same machine as the bench, so
// a receiver that moves work into the server is charged for it.

// serverProcs lists, on the bench's database, the server processes a run
// of a PostgreSQL receiver makes work for: the backends of its connections
// (which the bench names by application_name, one name a run) and the
// server's own (the WAL writer, the checkpointer, the background writer,
// autovacuum workers). The server's own processes also work for anything
// else on the server, so on a shared server the figure is an upper bound.
const serverProcs = `SELECT pid FROM pg_stat_activity
	WHERE application_name = $1 OR backend_type <> 'client backend'`

// serverMeter reads the CPU time of the server processes a run makes work
// for (serverProcs), by pid.
type serverMeter struct {
	dsn     string // the bench's own database URL; its backend is not counted
	appName string // the run's application_name
	hz      int64
}

// read returns each process's CPU time so far. It fails when the server
// cannot be asked or a process's /proc stat cannot be read (the server on
// another machine); a process that exits while it is read is left out.
func (m serverMeter) read(ctx context.Context) (map[int]time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, pgTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, m.dsn)
	if err != nil {
		return nil, fmt.Errorf("server cpu: %w", err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, serverProcs, m.appName)
	if err != nil {
		return nil, fmt.Errorf("server cpu: list processes: %w", err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Errorf("server cpu: list processes: %w", err)
	}
	out := make(map[int]time.Duration, len(pids))
	for _, pid := range pids {
		s, err := readStat(int(pid))
		if err != nil {
			continue
		}
		out[int(pid)] = s.cpuTime(m.hz)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("server cpu: none of the server's %d processes could be read (is the server on another machine?)", len(pids))
	}
	return out, nil
}

// serverBetween is the CPU time the server's processes used between two
// readings: a process in both counts its difference, one that began in
// between all of its time. One that ended in between is not counted.
func serverBetween(from, to map[int]time.Duration) time.Duration {
	var sum time.Duration
	for pid, t := range to {
		if f, ok := from[pid]; ok && f <= t {
			sum += t - f
		} else if !ok {
			sum += t
		}
	}
	return sum
}
