// Package sqlrow is what both stores share of the events row in SQL: how
// its values scan into inbox's types (a NULL text as "", Unix
// milliseconds as a time in UTC), and its queue columns, which every
// store reads and resets alike. Each scan type is a Scan destination as
// database/sql and pgx take one (its Scan(src any) error method), so a
// store's list of columns says how each is read with no step after the
// scan.
package sqlrow

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"inbox/inbox"
)

// Text scans a text column into *P: NULL as "".
type Text[T ~string] struct{ P *T }

// Scan implements sql.Scanner.
func (t Text[T]) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*t.P = ""
	case string:
		*t.P = T(v)
	case []byte:
		*t.P = T(v)
	default:
		return fmt.Errorf("scan %T as text", src)
	}
	return nil
}

// Time scans Unix milliseconds into *P, in UTC. With Unset, NULL and 0
// are the zero time (a time not set, such as a row's done_at before it
// is done); without, NULL is refused and 0 is the Unix epoch.
type Time struct {
	P     *time.Time
	Unset bool
}

// Scan implements sql.Scanner.
func (t Time) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		if !t.Unset {
			return fmt.Errorf("scan NULL as a time")
		}
		*t.P = time.Time{}
	case int64:
		if t.Unset && v == 0 {
			*t.P = time.Time{}
			return nil
		}
		*t.P = time.UnixMilli(v).UTC()
	default:
		return fmt.Errorf("scan %T as a time", src)
	}
	return nil
}

// Column is how a store reads one column of a row into a T.
type Column[T any] struct {
	Name string
	// Lazy columns (a body) are read only when asked for.
	Lazy bool
	// Scan returns where Scan stores the column into v.
	Scan func(v *T) any
}

// Columns are a row's columns in the order a statement selects them.
type Columns[T any] []Column[T]

// List is the select list of cs, the lazy ones only with lazy.
func (cs Columns[T]) List(lazy bool) string {
	var names []string
	for _, c := range cs {
		if lazy || !c.Lazy {
			names = append(names, c.Name)
		}
	}
	return strings.Join(names, ", ")
}

// Row scans a row of cs.List(lazy) through scan into a T.
func (cs Columns[T]) Row(scan func(...any) error, lazy bool) (T, error) {
	var v T
	dest := make([]any, 0, len(cs))
	for _, c := range cs {
		if lazy || !c.Lazy {
			dest = append(dest, c.Scan(&v))
		}
	}
	if err := scan(dest...); err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// Of returns what as makes of each of cols, in order: a store's own
// description of the row's columns, as a read scans them (Column), or
// the queue columns, as the store describes a column.
func Of[C, T any](cols []C, as func(C) T) []T {
	out := make([]T, len(cols))
	for i, c := range cols {
		out[i] = as(c)
	}
	return out
}

// QueueColumn is one of the events row's queue columns: the copy of its
// (row, destination) pairs' queue state the row keeps (attempts, the
// claim, the last error), which a landing never writes.
type QueueColumn struct {
	Name string
	// Fresh is what it holds on a row queued afresh (revived,
	// reprocessed, routed again).
	Fresh string
	// Scan returns where Scan stores it into e.
	Scan func(e *inbox.Event) any
}

// Queue are the events row's queue columns, in the table's order.
var Queue = []QueueColumn{
	{Name: "attempts", Fresh: "0", Scan: func(e *inbox.Event) any { return &e.Attempts }},
	{Name: "next_attempt_at", Fresh: "0", Scan: func(e *inbox.Event) any { return Time{P: &e.NextAttemptAt, Unset: true} }},
	{Name: "lease_owner", Fresh: "NULL", Scan: func(e *inbox.Event) any { return Text[string]{P: &e.LeaseOwner} }},
	{Name: "lease_until", Fresh: "NULL", Scan: func(e *inbox.Event) any { return Time{P: &e.LeaseUntil, Unset: true} }},
	{Name: "last_error", Fresh: "NULL", Scan: func(e *inbox.Event) any { return Text[string]{P: &e.LastError} }},
	{Name: "done_at", Fresh: "NULL", Scan: func(e *inbox.Event) any { return Time{P: &e.DoneAt, Unset: true} }},
}

// Dismissal are the events row's columns that record a dismissal (inbox
// dismiss), described as the queue columns are: a landing never writes
// them, and a row queued afresh (revived, reprocessed, routed again)
// holds none.
var Dismissal = []QueueColumn{
	{Name: "dismissed_at", Fresh: "NULL", Scan: func(e *inbox.Event) any { return Time{P: &e.DismissedAt, Unset: true} }},
	{Name: "dismissed_by", Fresh: "NULL", Scan: func(e *inbox.Event) any { return Text[string]{P: &e.DismissedBy} }},
	{Name: "dismiss_note", Fresh: "NULL", Scan: func(e *inbox.Event) any { return Text[string]{P: &e.DismissNote} }},
}

// Afresh are the columns a row queued afresh takes the Fresh value of:
// the queue's, then the dismissal's.
var Afresh = slices.Concat(Queue, Dismissal)

// Fresh is the SET list that queues a row afresh: each of Afresh as a
// new row holds it.
var Fresh = func() string {
	var sets []string
	for _, c := range Afresh {
		sets = append(sets, c.Name+" = "+c.Fresh)
	}
	return strings.Join(sets, ", ")
}()

// AddPairs is the statement that makes each pair of set (rows v of id,
// dest and due) new, due at its time, updated at now (a placeholder),
// where its row was handed on to its destinations (done, parked by the
// dispatcher or dismissed so, or new with a pair) and has no pair for
// dest yet; it returns the pairs it made.
func AddPairs(set, now string) string {
	return `INSERT INTO deliveries (event_id, destination, status, attempts, next_attempt_at, received_at, updated_at)
		SELECT v.id, v.dest, 'new', 0, v.due, e.received_at, ` + now + `
		FROM ` + set + ` JOIN events e ON e.id = v.id
		WHERE e.status = 'done'
			OR ((e.status = 'parked' OR e.status = 'dismissed')
				AND e.reason IN ('handler_failed', 'handler_rejected', 'too_large_for_destination'))
			OR (e.status = 'new' AND EXISTS (SELECT 1 FROM deliveries o WHERE o.event_id = e.id))
		ON CONFLICT (event_id, destination) DO NOTHING
		RETURNING event_id, destination`
}

// Query runs a read statement with args and calls fn with the Scan of
// each row it returns, in order, stopping at fn's first error. Each store
// implements it over its driver, so a read written once here runs on
// either.
type Query func(ctx context.Context, sql string, args []any, fn func(scan func(...any) error) error) error

// Collect returns what scan makes of each row q returns for sql.
func Collect[T any](ctx context.Context, q Query, sql string, args []any, scan func(scan func(...any) error) (T, error)) ([]T, error) {
	return Gather(func(fn func(scan func(...any) error) error) error { return q(ctx, sql, args, fn) }, scan)
}

// Gather returns what scan makes of each row each calls its fn with, as
// pgx's CollectRows does.
func Gather[T any](each func(fn func(scan func(...any) error) error) error, scan func(scan func(...any) error) (T, error)) ([]T, error) {
	var out []T
	err := each(func(sc func(...any) error) error {
		v, err := scan(sc)
		out = append(out, v)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Unverified reads each source's saved run of failed verifications, by
// source.
func Unverified(ctx context.Context, q Query) ([]inbox.Unverified, error) {
	return Collect(ctx, q, `SELECT source, count, first_at, last_at FROM unverified ORDER BY source`, nil,
		func(scan func(...any) error) (u inbox.Unverified, err error) {
			return u, scan(&u.Source, &u.Count, Time{P: &u.First}, Time{P: &u.Last})
		})
}

// SecretUses reads every recorded secret use, by source and fingerprint.
func SecretUses(ctx context.Context, q Query) ([]inbox.SecretUse, error) {
	return Collect(ctx, q, `SELECT source, fingerprint, last_verified_at FROM secret_uses ORDER BY source, fingerprint`, nil,
		func(scan func(...any) error) (u inbox.SecretUse, err error) {
			return u, scan(&u.Source, &u.Fingerprint, Time{P: &u.LastVerified})
		})
}

// Current are the columns of a row the landing rules (inbox.Land) read,
// with its id and saved response.
var Current = Columns[inbox.Event]{
	{Name: "id", Scan: func(e *inbox.Event) any { return &e.ID }},
	{Name: "status", Scan: func(e *inbox.Event) any { return &e.Status }},
	{Name: "reason", Scan: func(e *inbox.Event) any { return Text[inbox.Reason]{P: &e.Reason} }},
	{Name: "sha256", Scan: func(e *inbox.Event) any { return &e.SHA256 }},
	{Name: "event", Scan: func(e *inbox.Event) any { return Text[string]{P: &e.Event} }},
	{Name: "job_status", Scan: func(e *inbox.Event) any { return Text[string]{P: &e.JobStatus} }},
	{Name: "source", Scan: func(e *inbox.Event) any { return &e.Source }},
	{Name: "response", Scan: func(e *inbox.Event) any { return &e.Response }},
}

// PairingColumns are the columns of deliveries ScanPairing reads, in its
// order.
const PairingColumns = `destination, status, coalesce(reason, ''), attempts, next_attempt_at,
	coalesce(lease_owner, ''), lease_until, coalesce(last_error, ''), updated_at, done_at`

// ScanPairing scans a row of PairingColumns.
func ScanPairing(scan func(...any) error) (p inbox.Pairing, err error) {
	return p, scan(&p.Destination, &p.Status, &p.Reason, &p.Attempts, Time{P: &p.NextAttemptAt, Unset: true},
		&p.LeaseOwner, Time{P: &p.LeaseUntil, Unset: true}, &p.LastError, Time{P: &p.UpdatedAt}, Time{P: &p.DoneAt, Unset: true})
}

// Destinations tallies each destination's pairs as sql counts them (its
// rows: destination, status, pairs, in flight, retrying), the paused and
// down destinations with no pair included, by name.
func Destinations(ctx context.Context, q Query, sql string, args []any) ([]inbox.DestinationStats, error) {
	counts, err := Collect(ctx, q, sql, args, func(scan func(...any) error) (c inbox.DestinationCount, err error) {
		return c, scan(&c.Name, &c.Status, &c.N, &c.InFlight, &c.Retrying)
	})
	if err != nil {
		return nil, fmt.Errorf("count the destinations: %w", err)
	}
	paused, err := Paused(ctx, q)
	if err != nil {
		return nil, err
	}
	down, err := Down(ctx, q)
	if err != nil {
		return nil, err
	}
	return inbox.TallyDestinations(counts, paused, down), nil
}

// Down reads the destinations a dispatcher found down, by name.
func Down(ctx context.Context, q Query) ([]inbox.DownDestination, error) {
	out, err := Collect(ctx, q, `SELECT name, since, cause FROM down_destinations ORDER BY name`, nil,
		func(scan func(...any) error) (d inbox.DownDestination, err error) {
			return d, scan(&d.Name, Time{P: &d.Since}, &d.Cause)
		})
	if err != nil {
		return nil, fmt.Errorf("read the down destinations: %w", err)
	}
	return out, nil
}

// Paused reads the destinations an operator paused, by name.
func Paused(ctx context.Context, q Query) ([]string, error) {
	out, err := Collect(ctx, q, `SELECT name FROM paused_destinations ORDER BY name`, nil,
		func(scan func(...any) error) (name string, err error) { return name, scan(&name) })
	if err != nil {
		return nil, fmt.Errorf("read the paused destinations: %w", err)
	}
	return out, nil
}

// ReadCurrent reads the row sql selects by Current's columns; nil when
// there is none.
func ReadCurrent(ctx context.Context, q Query, sql string, args ...any) (*inbox.Event, error) {
	rows, err := Collect(ctx, q, sql, args, func(scan func(...any) error) (inbox.Event, error) { return Current.Row(scan, true) })
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	return &rows[0], nil
}

// AlertColumns are the columns of alerts ScanAlert reads, in its order.
const AlertColumns = `scope, finding, opened_at, count, reported_at, rev`

// ScanAlert scans a row of AlertColumns.
func ScanAlert(scan func(...any) error) (a inbox.Alert, err error) {
	return a, scan(&a.Scope, &a.Finding, Time{P: &a.OpenedAt}, &a.Count, Time{P: &a.ReportedAt}, &a.Rev)
}
