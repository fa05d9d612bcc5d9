// Package sqlfilter writes the SQL both stores run for an inbox.Filter:
// the WHERE clause over events, and the statements that list and count
// what it selects. It is written once, against a Dialect that says where
// the two databases differ (placeholders, how a body's bytes are
// searched, SQLite's partial-index condition), as river's dblist is; each
// store declares its Dialect and runs and scans the statements itself.
package sqlfilter

import (
	"context"
	"fmt"
	"strings"
	"time"

	"inbox/inbox"
	"inbox/sqlrow"
)

// Dialect is what differs between the stores' SQL for a filter.
type Dialect struct {
	// Param returns the placeholder of the n-th argument, from 1.
	Param func(n int) string
	// HasBytes returns the condition that the row's body holds the bytes
	// bound to the placeholder p, compared byte for byte.
	HasBytes func(p string) string
	// Settled, when not "", is added beside a condition on a status other
	// than new: the condition of the partial indexes on settled rows,
	// which SQLite uses only when a query repeats it.
	Settled string
	// RowKey is the column a search selects its newest rows by: the one
	// cheapest to sort and look up (SQLite's rowid).
	RowKey string
	// NoLimit is the LIMIT argument that limits nothing.
	NoLimit any
	// IDs returns the condition that a row's id is one of the list bound
	// to the placeholder p, and Bind the list as it is bound.
	IDs  func(p string) string
	Bind func(ids []string) any
}

// Query is a statement being written in a dialect: the arguments bound so
// far, each numbered as the dialect numbers them. Text is written in the
// order it binds, so positional placeholders (SQLite's ?) stay in step.
type Query struct {
	d    Dialect
	args []any
}

// Query starts a statement in d.
func (d Dialect) Query() *Query { return &Query{d: d} }

// Arg binds v and returns its placeholder.
func (q *Query) Arg(v any) string {
	q.args = append(q.args, v)
	return q.d.Param(len(q.args))
}

// Args returns the arguments bound, in order.
func (q *Query) Args() []any { return q.args }

// Where returns f as a WHERE clause over events ("" when it selects every
// row), binding its arguments. f.Limit is not used.
func (q *Query) Where(f inbox.Filter) string {
	clause := ""
	if conds := q.conds(f); len(conds) > 0 {
		clause = ` WHERE ` + strings.Join(conds, " AND ")
	}
	if f.Contains == "" {
		return clause
	}
	// The newest ScanLimit rows the rest selects, by the row key so the
	// sort carries no body, then their bodies searched.
	limit := q.d.NoLimit
	if f.ScanLimit > 0 {
		limit = f.ScanLimit
	}
	k := q.d.RowKey
	return ` WHERE ` + k + ` IN (SELECT ` + k + ` FROM events` + clause + ` ORDER BY received_at DESC, id LIMIT ` +
		q.Arg(limit) + `) AND ` + q.d.HasBytes(q.Arg([]byte(f.Contains)))
}

// Where returns f as a WHERE clause over events ("" when it selects every
// row) and its arguments.
func (d Dialect) Where(f inbox.Filter) (string, []any) {
	q := d.Query()
	return q.Where(f), q.args
}

// WhereIDs is Where narrowed to the rows of ids, when given.
func (d Dialect) WhereIDs(ids []string, f inbox.Filter) (string, []any) {
	q := d.Query()
	w := q.Where(f)
	if len(ids) == 0 {
		return w, q.args
	}
	cond := d.IDs(q.Arg(d.Bind(ids)))
	if w == "" {
		return ` WHERE ` + cond, q.args
	}
	return w + ` AND ` + cond, q.args
}

// conds returns f's conditions but Contains, as inbox.Filter defines them.
func (q *Query) conds(f inbox.Filter) []string {
	var conds []string
	add := func(format string, v any) { conds = append(conds, fmt.Sprintf(format, q.Arg(v))) }
	if f.Source != "" {
		add("source = %s", f.Source)
	}
	switch {
	case f.Destination != "":
		// The primary key of deliveries serves it, row by row.
		conds = append(conds, `EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = events.id AND `+
			strings.Join(q.pairConds(f.Destination, f.Status, f.Reason), " AND ")+`)`)
	case f.ByParkedPairs():
		if f.Status != "" && f.Status != inbox.StatusParked {
			add("status = %s", string(f.Status))
		}
		conds = append(conds, q.parked(f.Reason))
	default:
		status := f.Status
		if status == "" && f.Reason != "" {
			// A reason alone selects parked rows: a dismissed row keeps
			// its reason too.
			status = inbox.StatusParked
		}
		if status != "" {
			add("status = %s", string(status))
			if status != inbox.StatusNew && q.d.Settled != "" {
				conds = append(conds, q.d.Settled)
			}
		}
		if f.Reason != "" {
			add("reason = %s", string(f.Reason))
		}
	}
	if f.Job != "" {
		// The primary key finds the job's row, events_beside_job the rest.
		conds = append(conds, "(id = "+q.Arg(f.Job)+" OR (job_id = "+q.Arg(f.Job)+" AND job_id <> id))")
	}
	if f.Event != "" {
		add("event = %s", f.Event)
	}
	if f.JobStatus != "" {
		add("job_status = %s", f.JobStatus)
	}
	if !f.Since.IsZero() {
		add("received_at >= %s", f.Since.UnixMilli())
	}
	if !f.Before.IsZero() {
		add("received_at < %s", f.Before.UnixMilli())
	}
	return conds
}

// pairConds returns the conditions on a pair d: of destination dest when
// given, of status and with reason when given; with reason and no status,
// parked with it.
func (q *Query) pairConds(dest string, status inbox.Status, reason inbox.Reason) []string {
	var conds []string
	if dest != "" {
		conds = append(conds, "d.destination = "+q.Arg(dest))
	}
	if status != "" {
		conds = append(conds, "d.status = "+q.Arg(string(status)))
	} else if reason != "" {
		conds = append(conds, "d.status = 'parked'")
	}
	if reason != "" {
		conds = append(conds, "d.reason = "+q.Arg(string(reason)))
	}
	return conds
}

// parked returns the condition that a row of events is parked with
// reason (any, when ""), or one of its pairs is. Only a row new or parked
// can have a parked pair: its status mirrors its pairs'.
func (q *Query) parked(reason inbox.Reason) string {
	if reason == "" {
		return `(status = 'parked' OR (status = 'new' AND EXISTS (SELECT 1 FROM deliveries d
			WHERE d.event_id = events.id AND d.status = 'parked')))`
	}
	return `((status = 'parked' AND reason = ` + q.Arg(string(reason)) + `) OR ((status = 'new' OR status = 'parked')
		AND EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = events.id AND ` +
		strings.Join(q.pairConds("", "", reason), " AND ") + `)))`
}

// ParkedWith returns the condition that the parked row of the table
// (an alias of events) is parked with reason, itself or at one of its
// pairs, for a statement that selects parked rows alone.
func (q *Query) ParkedWith(table string, reason inbox.Reason) string {
	p := q.Arg(string(reason))
	return `(` + table + `.reason = ` + p + ` OR EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = ` + table +
		`.id AND d.status = 'parked' AND d.reason = ` + q.Arg(string(reason)) + `))`
}

// List returns the statement selecting columns of the rows f selects,
// newest first, at most f.Limit of them.
func (d Dialect) List(f inbox.Filter, columns string) (string, []any) {
	q := d.Query()
	w := q.Where(f)
	limit := d.NoLimit
	if f.Limit > 0 {
		limit = f.Limit
	}
	return `SELECT ` + columns + ` FROM events` + w + ` ORDER BY received_at DESC, id LIMIT ` + q.Arg(limit), q.args
}

// Count returns the statement counting the rows f selects.
func (d Dialect) Count(f inbox.Filter) (string, []any) {
	q := d.Query()
	return `SELECT count(*) FROM events` + q.Where(f), q.args
}

// selected is the common table e of the rows f selects, with what the
// parked counts read of them.
func (q *Query) selected(f inbox.Filter) string {
	return `WITH e AS (SELECT id, status, reason, received_at, updated_at FROM events` + q.Where(f) + `) `
}

// parkings returns the rows of (id, reason, received_at, at) of the rows
// of e: one for each reason a row is parked with, when it was parked
// with it: the row's own when it is parked and f has no Destination, and
// each of its parked pairs' (only f.Destination's when set); with
// f.Reason, only those of it.
func (q *Query) parkings(f inbox.Filter) string {
	var own string
	if f.Destination == "" {
		own = `SELECT id, reason, received_at, updated_at AS at FROM e WHERE status = 'parked'`
		if f.Reason != "" {
			own += ` AND reason = ` + q.Arg(string(f.Reason))
		}
		own += ` UNION ALL `
	}
	pair := q.pairConds(f.Destination, "", f.Reason)
	if f.Reason == "" {
		pair = append(pair, "d.status = 'parked'")
	}
	return own + `SELECT e.id, d.reason, e.received_at, d.updated_at AS at FROM e JOIN deliveries d ON d.event_id = e.id
		WHERE ` + strings.Join(pair, " AND ")
}

// Reasons returns the statement counting the rows f selects per reason
// they are parked with (itself or at a pair: a row parked with two
// reasons counts under each), with the oldest and newest received_at of
// each: most rows first, then by reason. It reads (reason, count,
// oldest, newest).
func (d Dialect) Reasons(f inbox.Filter) (string, []any) {
	q := d.Query()
	sql := q.selected(f) + `SELECT reason, count(DISTINCT id) AS n, min(received_at), max(received_at)
		FROM (` + q.parkings(f) + `) AS p GROUP BY reason ORDER BY n DESC, reason`
	return sql, q.args
}

// ParkedAgo returns the statement counting the rows f selects by when
// they were parked (with f.Reason, at f.Destination when given: the
// latest such parking of each row), in whole hours before end, of those
// parked in [start, end). It reads (ago, count).
func (d Dialect) ParkedAgo(f inbox.Filter, start, end time.Time) (string, []any) {
	q := d.Query()
	sql := q.selected(f)
	sql += `SELECT (CAST(` + q.Arg(end.UnixMilli()) + ` AS bigint) - at - 1) / CAST(` + q.Arg(time.Hour.Milliseconds()) + ` AS bigint) AS ago, count(*)
		FROM (SELECT id, max(at) AS at FROM (` + q.parkings(f) + `) AS p GROUP BY id) AS r`
	sql += ` WHERE at >= ` + q.Arg(start.UnixMilli()) + ` AND at < ` + q.Arg(end.UnixMilli()) + ` GROUP BY ago`
	return sql, q.args
}

// Counts is a store's inbox.CountStore: the counts written once in a
// dialect over the store's Query, and its queue at its clock.
type Counts struct {
	Dialect Dialect
	Query   sqlrow.Query
	Queue   func(ctx context.Context) (inbox.Queue, error)
}

// QueueNow reads the queue at the store's clock.
func (c Counts) QueueNow(ctx context.Context) (inbox.Queue, error) { return c.Queue(ctx) }

// CountRows counts the rows f selects.
func (c Counts) CountRows(ctx context.Context, f inbox.Filter) (int64, error) {
	sql, args := c.Dialect.Count(f)
	var n int64
	return n, c.Query(ctx, sql, args, func(scan func(...any) error) error { return scan(&n) })
}

// CountReasons counts the rows f selects per reason they are parked with.
func (c Counts) CountReasons(ctx context.Context, f inbox.Filter) ([]inbox.ReasonCount, error) {
	sql, args := c.Dialect.Reasons(f)
	return sqlrow.Collect(ctx, c.Query, sql, args, func(scan func(...any) error) (rc inbox.ReasonCount, err error) {
		return rc, scan(&rc.Reason, &rc.Count, sqlrow.Time{P: &rc.Oldest}, sqlrow.Time{P: &rc.Newest})
	})
}

// CountParkedAgo counts the rows f selects by the whole hours before end
// they were parked, of those parked in [start, end).
func (c Counts) CountParkedAgo(ctx context.Context, f inbox.Filter, start, end time.Time) (map[int64]int64, error) {
	sql, args := c.Dialect.ParkedAgo(f, start, end)
	counts := map[int64]int64{}
	return counts, c.Query(ctx, sql, args, func(scan func(...any) error) error {
		var ago, n int64
		err := scan(&ago, &n)
		counts[ago] = n
		return err
	})
}

// CountGroups counts the rows of each source, status and reason, and the
// delivery attempts recorded on them.
func (c Counts) CountGroups(ctx context.Context) ([]inbox.Group, error) {
	return sqlrow.Collect(ctx, c.Query, `SELECT source, status, coalesce(reason, ''), count(*), sum(attempts)
		FROM events GROUP BY source, status, reason`, nil, func(scan func(...any) error) (g inbox.Group, err error) {
		return g, scan(&g.Source, &g.Status, &g.Reason, &g.Rows, &g.Attempts)
	})
}

// CountStatuses counts the rows of each status. It reads the (status,
// received_at) index alone, never the rows, so it is cheap enough to run
// at every metrics scrape.
func (c Counts) CountStatuses(ctx context.Context) (map[inbox.Status]int64, error) {
	counts := map[inbox.Status]int64{}
	return counts, c.Query(ctx, `SELECT status, count(*) FROM events GROUP BY status`, nil, func(scan func(...any) error) error {
		var st inbox.Status
		var n int64
		err := scan(&st, &n)
		counts[st] = n
		return err
	})
}
