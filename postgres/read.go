package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"inbox/inbox"
)

// eventColumns are the columns scanEvent reads, in its order.
const eventColumns = `id, coalesce(job_id, ''), status, coalesce(reason, ''), coalesce(event, ''),
	coalesce(job_status, ''), coalesce(result_url, ''), size, sha256, delivery_ts, received_at,
	deliveries, last_seen_at, updated_at, attempts, next_attempt_at, coalesce(lease_owner, ''),
	lease_until, coalesce(last_error, ''), done_at, source, response`

// Get returns the row with the given id, body included, or ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (inbox.Event, error) {
	var e inbox.Event
	err := s.read(ctx, func(ctx context.Context, q querier) error {
		var err error
		e, err = scanEvent(q.QueryRow(ctx, `SELECT `+eventColumns+`, body FROM events WHERE id = $1`, id).Scan, true)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return inbox.Event{}, fmt.Errorf("get %s: %w", id, inbox.ErrNotFound)
	}
	if err != nil {
		return inbox.Event{}, fmt.Errorf("get %s: %w", id, err)
	}
	return e, nil
}

// where returns f as a WHERE clause ("" when it selects every row) and its
// arguments, numbered from $1.
func where(f inbox.Filter) (string, []any) {
	var conds []string
	var args []any
	add := func(cond string, arg any) {
		args = append(args, arg)
		conds = append(conds, fmt.Sprintf(cond, len(args)))
	}
	if f.Source != "" {
		add("source = $%d", f.Source)
	}
	if f.Status != "" {
		add("status = $%d", string(f.Status))
	}
	if f.Reason != "" {
		add("reason = $%d", string(f.Reason))
	}
	if !f.Since.IsZero() {
		add("received_at >= $%d", f.Since.UnixMilli())
	}
	if !f.Before.IsZero() {
		add("received_at < $%d", f.Before.UnixMilli())
	}
	if len(conds) == 0 {
		return "", nil
	}
	return ` WHERE ` + strings.Join(conds, " AND "), args
}

// List returns rows without their bodies, newest first.
func (s *Store) List(ctx context.Context, f inbox.Filter) ([]inbox.Event, error) {
	return inbox.Collect(ctx, f, s.Each)
}

// Each calls fn with each row List returns, as it arrives: pgx reads the
// rows off the connection as they are asked for.
func (s *Store) Each(ctx context.Context, f inbox.Filter, fn func(inbox.Event) error) error {
	w, args := where(f)
	sql := `SELECT ` + eventColumns + ` FROM events` + w + ` ORDER BY received_at DESC, id`
	if f.Limit > 0 {
		sql += fmt.Sprintf(` LIMIT %d`, f.Limit)
	}
	return s.read(ctx, func(ctx context.Context, q querier) error {
		rows, err := q.Query(ctx, sql, args...)
		if err != nil {
			return fmt.Errorf("list: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			e, err := scanEvent(rows.Scan, false)
			if err != nil {
				return fmt.Errorf("list: %w", err)
			}
			if err := fn(e); err != nil {
				return err
			}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("list: %w", err)
		}
		return nil
	})
}

// querier is what a read runs its statements on: the pool, or the
// transaction read opens for a long one.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// read runs fn, a read, bounded by ctx's deadline when it has one (an
// operator's --timeout), else by the busy timeout. The session's
// statement_timeout is a little under the busy timeout, for serve's own
// reads; a longer deadline runs fn in a read-only transaction whose
// statement_timeout is the deadline and a second more, so the client's
// deadline ends the statement first and the caller can tell it from a
// failure, while the server still ends it should the client vanish.
func (s *Store) read(ctx context.Context, fn func(ctx context.Context, q querier) error) error {
	deadline, ok := ctx.Deadline()
	if !ok || time.Until(deadline) <= s.busy*9/10 {
		ctx, cancel := context.WithTimeout(ctx, s.busy)
		defer cancel()
		return fn(ctx, s.pool)
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	ms := (time.Until(deadline) + time.Second).Milliseconds()
	if _, err := tx.Exec(ctx, `SELECT set_config('statement_timeout', $1, true)`, strconv.FormatInt(ms, 10)); err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	if err := fn(ctx, tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// Stats counts rows per status and parked rows per reason, the delivery
// attempts recorded on rows, and the queue of new rows, at the store's
// clock.
func (s *Store) Stats(ctx context.Context) (inbox.Stats, error) {
	st := inbox.NewStats()
	err := s.read(ctx, func(ctx context.Context, q querier) error {
		rows, err := q.Query(ctx, `SELECT source, status, coalesce(reason, ''), count(*), sum(attempts)
			FROM events GROUP BY source, status, reason`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var source, status, reason string
			var n, attempts int64
			if err := rows.Scan(&source, &status, &reason, &n, &attempts); err != nil {
				return err
			}
			st.Count(source, inbox.Status(status), inbox.Reason(reason), n, attempts)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		st.Queue, err = s.Queue(ctx, s.localNow())
		return err
	})
	if err != nil {
		return inbox.Stats{}, fmt.Errorf("stats: %w", err)
	}
	return st, nil
}

// CountByStatus counts the rows of each status, every status included
// (zero when it has none). It fails only when the database cannot be read.
func (s *Store) CountByStatus(ctx context.Context) (map[inbox.Status]int64, error) {
	counts := make(map[inbox.Status]int64, len(inbox.Statuses()))
	for _, st := range inbox.Statuses() {
		counts[st] = 0
	}
	err := s.read(ctx, func(ctx context.Context, q querier) error {
		rows, err := q.Query(ctx, `SELECT status, count(*) FROM events GROUP BY status`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var st string
			var n int64
			if err := rows.Scan(&st, &n); err != nil {
				return err
			}
			counts[inbox.Status(st)] = n
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("count rows: %w", err)
	}
	return counts, nil
}

// ParkedByReason counts the parked rows that f selects, one ReasonCount per
// reason, most rows first. f.Status and f.Limit are ignored. It fails only
// when the database cannot be read.
func (s *Store) ParkedByReason(ctx context.Context, f inbox.Filter) ([]inbox.ReasonCount, error) {
	f.Status = inbox.StatusParked
	w, args := where(f)
	var out []inbox.ReasonCount
	err := s.read(ctx, func(ctx context.Context, q querier) error {
		rows, err := q.Query(ctx, `SELECT reason, count(*), min(received_at), max(received_at)
			FROM events`+w+` GROUP BY reason ORDER BY count(*) DESC, reason`, args...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (inbox.ReasonCount, error) {
			var rc inbox.ReasonCount
			var oldest, newest int64
			err := r.Scan(&rc.Reason, &rc.Count, &oldest, &newest)
			rc.Oldest, rc.Newest = fromMillis(oldest), fromMillis(newest)
			return rc, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("count parked rows: %w", err)
	}
	return out, nil
}

func scanEvent(scan func(...any) error, withBody bool) (inbox.Event, error) {
	var e inbox.Event
	var received, lastSeen, updated, nextAttempt int64
	var leaseUntil, doneAt *int64
	dest := []any{&e.ID, &e.JobID, &e.Status, &e.Reason, &e.Event, &e.JobStatus, &e.ResultURL,
		&e.Size, &e.SHA256, &e.DeliveryTS, &received, &e.Deliveries, &lastSeen, &updated,
		&e.Attempts, &nextAttempt, &e.LeaseOwner, &leaseUntil, &e.LastError, &doneAt, &e.Source, &e.Response}
	if withBody {
		dest = append(dest, &e.Body)
	}
	if err := scan(dest...); err != nil {
		return inbox.Event{}, err
	}
	e.ReceivedAt, e.LastSeenAt, e.UpdatedAt = fromMillis(received), fromMillis(lastSeen), fromMillis(updated)
	if nextAttempt != 0 {
		e.NextAttemptAt = fromMillis(nextAttempt)
	}
	if leaseUntil != nil {
		e.LeaseUntil = fromMillis(*leaseUntil)
	}
	if doneAt != nil {
		e.DoneAt = fromMillis(*doneAt)
	}
	return e, nil
}

// Count counts the rows f selects, f.Limit aside: what List would return
// without a limit. It fails only when the database cannot be read.
func (s *Store) Count(ctx context.Context, f inbox.Filter) (int64, error) {
	w, args := where(f)
	var n int64
	if err := s.read(ctx, func(ctx context.Context, q querier) error {
		return q.QueryRow(ctx, `SELECT count(*) FROM events`+w, args...).Scan(&n)
	}); err != nil {
		return 0, fmt.Errorf("count rows: %w", err)
	}
	return n, nil
}

// ParkedPerHour counts the rows f selects that are parked and were parked
// (their updated_at: on receipt, or when the dispatcher gave up on them)
// in each of the hours hour-long windows that end at end, oldest first;
// an hour with none counts 0. f.Status, f.Since, f.Before and f.Limit are
// ignored. A row parked again (reprocess) counts at its latest parking. It
// fails only when the database cannot be read.
func (s *Store) ParkedPerHour(ctx context.Context, f inbox.Filter, end time.Time, hours int) ([]inbox.HourCount, error) {
	out := inbox.Hours(end, hours)
	if out == nil {
		return nil, nil
	}
	f.Status, f.Since, f.Before, f.Limit = inbox.StatusParked, time.Time{}, time.Time{}, 0
	w, args := where(f)
	hour := time.Hour.Milliseconds()
	endMs, startMs := end.UnixMilli(), out[0].Start.UnixMilli()
	n := len(args)
	err := s.read(ctx, func(ctx context.Context, q querier) error {
		// ago is 0 for [end-1h, end), 1 for the hour before, and so on.
		rows, err := q.Query(ctx, fmt.Sprintf(`SELECT ($%d::bigint - updated_at - 1) / $%d::bigint AS ago, count(*)
			FROM events%s AND updated_at >= $%d AND updated_at < $%d GROUP BY ago`, n+1, n+2, w, n+3, n+1),
			append(args, endMs, hour, startMs)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var ago, count int64
			if err := rows.Scan(&ago, &count); err != nil {
				return err
			}
			inbox.CountAgo(out, ago, count)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("count parked rows per hour: %w", err)
	}
	return out, nil
}
