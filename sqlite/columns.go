package sqlite

import (
	"strings"

	"inbox/inbox"
	"inbox/sqlrow"
)

// column is one column of the events row as this store writes and reads
// it. columns is the one description of the row: the insert's column list
// and arguments, the revive, the select list and the scan are made from
// it, so a column is added here (and in schema.sql) and nowhere else.
type column struct {
	name string
	// bind is the column's value as a delivery lands (the insert's, and a
	// revive's where revive uses it); nil for a column a landing does not
	// write, which a new row takes the default of.
	bind func(l *landed) any
	// stamped columns hold the landing's clock, which the writer sets
	// last (setNow).
	stamped bool
	// revive is the column's SET expression when a delivery revives a
	// parked row, its ? bound to bind's value; "" writes it again. A
	// column bind does not write takes fresh instead.
	revive string
	// kept columns are left as they are by a revive: the row's key and
	// when it was first received.
	kept bool
	// fresh is what a column the landing does not write (the queue's)
	// holds on a row queued afresh.
	fresh string
	// scan returns where Scan stores the column into e.
	scan func(e *inbox.Event) any
	// lazy columns (the body) are read only when asked for.
	lazy bool
}

// landed is what a delivery's landing writes: the delivery, how many
// deliveries it counts, when the last was seen, and the clock (nil until
// the writer knows it: setNow).
type landed struct {
	d        *inbox.Delivery
	n        int64
	lastSeen any
	now      any
}

// columns are the events row's columns: those a landing writes, then the
// queue's and the dismissal's (sqlrow.Afresh).
var columns = append([]column{
	{name: "id", bind: func(l *landed) any { return l.d.Key }, kept: true,
		scan: func(e *inbox.Event) any { return &e.ID }},
	{name: "job_id", bind: func(l *landed) any { return nullable(l.d.JobID) }, kept: true,
		scan: func(e *inbox.Event) any { return sqlrow.Text[string]{P: &e.JobID} }},
	{name: "status", bind: func(l *landed) any { return string(l.d.Status) },
		scan: func(e *inbox.Event) any { return &e.Status }},
	{name: "reason", bind: func(l *landed) any { return nullable(string(l.d.Reason)) },
		scan: func(e *inbox.Event) any { return sqlrow.Text[inbox.Reason]{P: &e.Reason} }},
	{name: "event", bind: func(l *landed) any { return nullable(l.d.Event) },
		scan: func(e *inbox.Event) any { return sqlrow.Text[string]{P: &e.Event} }},
	{name: "job_status", bind: func(l *landed) any { return nullable(l.d.JobStatus) },
		scan: func(e *inbox.Event) any { return sqlrow.Text[string]{P: &e.JobStatus} }},
	{name: "result_url", bind: func(l *landed) any { return nullable(l.d.ResultURL) },
		scan: func(e *inbox.Event) any { return sqlrow.Text[string]{P: &e.ResultURL} }},
	{name: "body", bind: func(l *landed) any { return l.d.Body }, lazy: true,
		scan: func(e *inbox.Event) any { return &e.Body }},
	{name: "size", bind: func(l *landed) any { return int64(len(l.d.Body)) },
		scan: func(e *inbox.Event) any { return &e.Size }},
	{name: "sha256", bind: func(l *landed) any { return l.d.SHA256 },
		scan: func(e *inbox.Event) any { return &e.SHA256 }},
	{name: "delivery_ts", bind: func(l *landed) any { return l.d.DeliveryTS },
		scan: func(e *inbox.Event) any { return &e.DeliveryTS }},
	{name: "received_at", bind: func(l *landed) any { return l.now }, stamped: true, kept: true,
		scan: func(e *inbox.Event) any { return sqlrow.Time{P: &e.ReceivedAt} }},
	{name: "deliveries", bind: func(l *landed) any { return l.n }, revive: "deliveries + ?",
		scan: func(e *inbox.Event) any { return &e.Deliveries }},
	{name: "last_seen_at", bind: func(l *landed) any { return l.lastSeen }, stamped: true, revive: "max(last_seen_at, ?)",
		scan: func(e *inbox.Event) any { return sqlrow.Time{P: &e.LastSeenAt} }},
	{name: "updated_at", bind: func(l *landed) any { return l.now }, stamped: true,
		scan: func(e *inbox.Event) any { return sqlrow.Time{P: &e.UpdatedAt} }},
	{name: "source", bind: func(l *landed) any { return inbox.SourceOf(*l.d) }, kept: true,
		scan: func(e *inbox.Event) any { return &e.Source }},
	{name: "response", bind: func(l *landed) any { return l.d.Response }, revive: "COALESCE(response, ?)",
		scan: func(e *inbox.Event) any { return &e.Response }},
}, sqlrow.Of(sqlrow.Afresh, func(q sqlrow.QueueColumn) column {
	return column{name: q.Name, fresh: q.Fresh, scan: q.Scan}
})...)

// The statements and lists made from columns, once.
var (
	// landing are the columns a landing writes, in the table's order.
	landing = filter(func(c column) bool { return c.bind != nil })
	// insertSQL inserts a row of the landing's columns, leaving a row
	// whose key is taken as it is.
	insertSQL = `INSERT INTO events (` + names(landing) + `) VALUES (` +
		strings.TrimSuffix(strings.Repeat("?, ", len(landing)), ", ") + `) ON CONFLICT(id) DO NOTHING`
	// stampedAt are the indexes in insertArgs of the stamped columns.
	stampedAt = indexes(landing, func(c column) bool { return c.stamped })
	// reviveSQL makes the parked row at its last argument new with a
	// delivery's columns (reviveArgs), queued afresh.
	reviveSQL = `UPDATE events SET ` + reviveSets() + ` WHERE id = ?`
	// eventColumns are the columns scanEvent reads without the lazy ones,
	// in its order; bodyColumns with them.
	eventColumns = reads.List(false)
	bodyColumns  = reads.List(true)
)

// filter returns the columns keep selects, in order.
func filter(keep func(column) bool) []column {
	var out []column
	for _, c := range columns {
		if keep(c) {
			out = append(out, c)
		}
	}
	return out
}

// names lists the names of cs.
func names(cs []column) string {
	var out []string
	for _, c := range cs {
		out = append(out, c.name)
	}
	return strings.Join(out, ", ")
}

// indexes returns the indexes in cs of the columns that hold.
func indexes(cs []column, hold func(column) bool) []int {
	var out []int
	for i, c := range cs {
		if hold(c) {
			out = append(out, i)
		}
	}
	return out
}

// insertArgs are insertSQL's arguments for d, received at now (nil: set
// later, by setNow). Put makes them in the request's goroutine, so that
// the writer does not box them for each row; every value is already of a
// type database/sql passes on as it is.
func insertArgs(d inbox.Delivery, now any) []any {
	l := landed{d: &d, n: 1, lastSeen: now, now: now}
	args := make([]any, len(landing))
	for i, c := range landing {
		args[i] = c.bind(&l)
	}
	return args
}

// setNow sets the stamped columns of args, insertArgs' result, to now.
func setNow(args []any, now any) {
	for _, i := range stampedAt {
		args[i] = now
	}
}

// reviveSets is the SET list of reviveSQL.
func reviveSets() string {
	var sets []string
	for _, c := range columns {
		switch {
		case c.bind == nil:
			sets = append(sets, c.name+" = "+c.fresh)
		case c.revive != "":
			sets = append(sets, c.name+" = "+c.revive)
		case !c.kept:
			sets = append(sets, c.name+" = ?")
		}
	}
	return strings.Join(sets, ", ")
}

// reviveArgs are reviveSQL's arguments: d's columns, n deliveries more,
// the last seen at lastSeen, at now.
func reviveArgs(d inbox.Delivery, n, lastSeen, now int64) []any {
	l := landed{d: &d, n: n, lastSeen: lastSeen, now: now}
	var args []any
	for _, c := range columns {
		if c.bind != nil && !c.kept {
			args = append(args, c.bind(&l))
		}
	}
	return append(args, d.Key)
}

// scanEvent scans a row of eventColumns (bodyColumns withBody) into an
// Event.
func scanEvent(scan func(...any) error, withBody bool) (inbox.Event, error) {
	return reads.Row(scan, withBody)
}

// reads are the columns as a read scans them.
var reads sqlrow.Columns[inbox.Event] = sqlrow.Of(columns, func(c column) sqlrow.Column[inbox.Event] {
	return sqlrow.Column[inbox.Event]{Name: c.name, Lazy: c.lazy, Scan: c.scan}
})
