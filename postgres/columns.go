package postgres

import (
	"slices"
	"strconv"
	"strings"

	"inbox/inbox"
	"inbox/sqlrow"
)

// column is one column of the events row as this store writes and reads
// it. columns is the one description of the row: the insert's column
// list, its unnest arrays and their arguments, the revive, the select
// list and the scan are made from it, so a column is added here (and in
// a migration) and nowhere else.
type column struct {
	name string
	// The column's value from a delivery, by the type of its unnest array
	// in the insert: text, bytea or bigint. At most one is set; none for a
	// column a delivery does not give.
	text  func(d *inbox.Delivery) string
	bytes func(d *inbox.Delivery) []byte
	int   func(d *inbox.Delivery) int64
	// null text columns hold NULL for "".
	null bool
	// insert is the insert's expression for a column a delivery does not
	// give but a landing writes (n.now, the clock); "" leaves the default.
	insert string
	// land is that column's value in a revive.
	land func(l landed) any
	// revive is the column's SET expression when a delivery revives a
	// parked row, its ? bound to the column's value; "" writes it again.
	// A column the landing does not write takes fresh instead.
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

// landed is what a revive counts besides the delivery: how many
// deliveries, and the clock.
type landed struct{ n, now int64 }

// columns are the events row's columns: those a landing writes, then the
// queue's and the dismissal's (sqlrow.Afresh).
var columns = append([]column{
	{name: "id", text: func(d *inbox.Delivery) string { return d.Key }, kept: true,
		scan: func(e *inbox.Event) any { return &e.ID }},
	{name: "job_id", text: func(d *inbox.Delivery) string { return d.JobID }, null: true, kept: true,
		scan: func(e *inbox.Event) any { return sqlrow.Text[string]{P: &e.JobID} }},
	{name: "status", text: func(d *inbox.Delivery) string { return string(d.Status) },
		scan: func(e *inbox.Event) any { return &e.Status }},
	{name: "reason", text: func(d *inbox.Delivery) string { return string(d.Reason) }, null: true,
		scan: func(e *inbox.Event) any { return sqlrow.Text[inbox.Reason]{P: &e.Reason} }},
	{name: "event", text: func(d *inbox.Delivery) string { return d.Event }, null: true,
		scan: func(e *inbox.Event) any { return sqlrow.Text[string]{P: &e.Event} }},
	{name: "job_status", text: func(d *inbox.Delivery) string { return d.JobStatus }, null: true,
		scan: func(e *inbox.Event) any { return sqlrow.Text[string]{P: &e.JobStatus} }},
	{name: "result_url", text: func(d *inbox.Delivery) string { return d.ResultURL }, null: true,
		scan: func(e *inbox.Event) any { return sqlrow.Text[string]{P: &e.ResultURL} }},
	{name: "body", bytes: func(d *inbox.Delivery) []byte { return d.Body }, lazy: true,
		scan: func(e *inbox.Event) any { return &e.Body }},
	{name: "size", int: func(d *inbox.Delivery) int64 { return int64(len(d.Body)) },
		scan: func(e *inbox.Event) any { return &e.Size }},
	{name: "sha256", text: func(d *inbox.Delivery) string { return d.SHA256 },
		scan: func(e *inbox.Event) any { return &e.SHA256 }},
	{name: "delivery_ts", int: func(d *inbox.Delivery) int64 { return d.DeliveryTS },
		scan: func(e *inbox.Event) any { return &e.DeliveryTS }},
	{name: "received_at", insert: "n.now", kept: true,
		scan: func(e *inbox.Event) any { return sqlrow.Time{P: &e.ReceivedAt} }},
	{name: "deliveries", insert: "1", land: func(l landed) any { return l.n }, revive: "deliveries + ?",
		scan: func(e *inbox.Event) any { return &e.Deliveries }},
	{name: "last_seen_at", insert: "n.now", land: func(l landed) any { return l.now }, revive: "greatest(last_seen_at, ?)",
		scan: func(e *inbox.Event) any { return sqlrow.Time{P: &e.LastSeenAt} }},
	{name: "updated_at", insert: "n.now", land: func(l landed) any { return l.now },
		scan: func(e *inbox.Event) any { return sqlrow.Time{P: &e.UpdatedAt} }},
	{name: "source", text: func(d *inbox.Delivery) string { return inbox.SourceOf(*d) }, kept: true,
		scan: func(e *inbox.Event) any { return &e.Source }},
	{name: "response", bytes: func(d *inbox.Delivery) []byte { return d.Response }, revive: "coalesce(response, ?)",
		scan: func(e *inbox.Event) any { return &e.Response }},
}, sqlrow.Of(sqlrow.Afresh, func(q sqlrow.QueueColumn) column {
	return column{name: q.Name, fresh: q.Fresh, scan: q.Scan}
})...)

// given reports whether a delivery gives the column, and the type of its
// unnest array.
func (c column) given() (string, bool) {
	switch {
	case c.text != nil:
		return "text", true
	case c.bytes != nil:
		return "bytea", true
	case c.int != nil:
		return "bigint", true
	}
	return "", false
}

// value is the column's value for d, "" as NULL for a null column.
func (c column) value(d *inbox.Delivery) any {
	switch {
	case c.text != nil && c.null:
		return nullable(c.text(d))
	case c.text != nil:
		return c.text(d)
	case c.bytes != nil:
		return c.bytes(d)
	}
	return c.int(d)
}

// The statements and lists made from columns, once.
var (
	// insertPlain inserts the rows (insertArgs) and returns their
	// ids: those whose keys were not already taken.
	insertPlain = insertSQL()
	// reviveSQL makes the parked row at its last argument new with a
	// delivery's columns (reviveArgs), queued afresh.
	reviveSQL = reviveStatement()
	// eventColumns are the columns scanEvent reads without the lazy ones,
	// in its order; bodyColumns with them.
	eventColumns = reads.List(false)
	bodyColumns  = reads.List(true)
)

// insertSQL is the insert of the rows of unnest arrays, one a column a
// delivery gives (insertArgs'), at the clock of the argument after
// them (NULL: the database's).
func insertSQL() string {
	var cols, exprs, arrays, us []string
	for _, c := range columns {
		typ, given := c.given()
		switch {
		case given && c.null:
			exprs = append(exprs, "NULLIF(u."+c.name+", '')")
		case given:
			exprs = append(exprs, "u."+c.name)
		case c.insert != "":
			exprs = append(exprs, c.insert)
		default:
			continue
		}
		cols = append(cols, c.name)
		if given {
			arrays = append(arrays, "$"+strconv.Itoa(len(arrays)+1)+"::"+typ+"[]")
			us = append(us, c.name)
		}
	}
	return `INSERT INTO events (` + strings.Join(cols, ", ") + `)
		SELECT ` + strings.Join(exprs, ", ") + `
		FROM unnest(` + strings.Join(arrays, ", ") + `) AS u(` + strings.Join(us, ", ") + `),
			(SELECT coalesce($` + strconv.Itoa(len(arrays)+1) + `::bigint, ` + dbNow + `) AS now) n
		ORDER BY u.id
		ON CONFLICT (id) DO NOTHING
		RETURNING id`
}

// insertArgs are insertPlain's arguments: the deliveries of batch at the
// indexes idx, in key order, an array a column a delivery gives, then
// clock (nil for the database's). keys is the id column's array.
func insertArgs(batch []inbox.Delivery, idx []int, clock any) (args []any, keys []string) {
	idx = slices.Clone(idx)
	slices.SortFunc(idx, func(a, b int) int { return strings.Compare(batch[a].Key, batch[b].Key) })
	n := len(idx)
	var nText, nBytes, nInt int
	for _, c := range columns {
		nText, nBytes, nInt = nText+btoi(c.text != nil), nBytes+btoi(c.bytes != nil), nInt+btoi(c.int != nil)
	}
	// One backing array a type, each column's array the next n of it.
	text, bytes, ints := make([]string, nText*n), make([][]byte, nBytes*n), make([]int64, nInt*n)
	for _, c := range columns {
		switch {
		case c.text != nil:
			var a []string
			a, text = fill(text, batch, idx, c.text)
			if c.name == "id" {
				keys = a
			}
			args = append(args, a)
		case c.bytes != nil:
			var a [][]byte
			a, bytes = fill(bytes, batch, idx, c.bytes)
			args = append(args, a)
		case c.int != nil:
			var a []int64
			a, ints = fill(ints, batch, idx, c.int)
			args = append(args, a)
		}
	}
	return append(args, clock), keys
}

// fill sets the first len(idx) of backing to value of each delivery of
// batch at idx, in order, and returns them and the rest of backing.
func fill[T any](backing []T, batch []inbox.Delivery, idx []int, value func(*inbox.Delivery) T) (a, rest []T) {
	n := len(idx)
	a, rest = backing[:n:n], backing[n:]
	for j, i := range idx {
		a[j] = value(&batch[i])
	}
	return a, rest
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// reviveStatement is reviveSQL.
func reviveStatement() string {
	var sets []string
	n := 0
	for _, c := range columns {
		_, given := c.given()
		switch {
		case c.kept:
		case given || c.land != nil:
			n++
			expr := "?"
			if c.revive != "" {
				expr = c.revive
			}
			sets = append(sets, c.name+" = "+strings.Replace(expr, "?", "$"+strconv.Itoa(n), 1))
		case c.fresh != "":
			sets = append(sets, c.name+" = "+c.fresh)
		}
	}
	return `UPDATE events SET ` + strings.Join(sets, ", ") + ` WHERE id = $` + strconv.Itoa(n+1)
}

// reviveArgs are reviveSQL's arguments: d's columns, n deliveries more,
// at now.
func reviveArgs(d inbox.Delivery, n, now int64) []any {
	var args []any
	for _, c := range columns {
		_, given := c.given()
		switch {
		case c.kept:
		case given:
			args = append(args, c.value(&d))
		case c.land != nil:
			args = append(args, c.land(landed{n: n, now: now}))
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
