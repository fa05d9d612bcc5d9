// Package rowview is one row as inbox show prints it and the console's row
// page shows it: its fields (inbox.EventFields), where it stands with each
// destination it is for, the earlier series inbox replay replaced, the
// other rows of its job, its body and the answer saved with it. Both read
// the row through Read and render the same tables, as text for a terminal
// or as HTML, so they cannot differ: a field or a table added here is in
// both. Every text a table holds is escaped once here (bodyview.Printable),
// and every body is bounded by bodyview.
package rowview

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"inbox/bodyview"
	"inbox/inbox"
)

// Store is what Read reads of a store.
type Store interface {
	Get(ctx context.Context, id string) (inbox.Event, error)
	Deliveries(ctx context.Context, id string) ([]inbox.Pairing, error)
	List(ctx context.Context, f inbox.Filter) ([]inbox.Event, error)
}

// MaxJobRows is how many of the other rows of a row's job are listed, the
// newest first: a job's conflicts are as many as the distinct bodies its
// sender signed, so they are bounded here.
const MaxJobRows = 100

// Row is one row as it is shown.
type Row struct {
	Event inbox.Event
	// Pairs is where the row stands with each destination it is for.
	Pairs []inbox.Pairing
	// Tables are the row's lines, in the order they are shown: its
	// fields, its destinations, their earlier series (when a replay
	// replaced any), the other rows of its job (when it has any).
	Tables []Table
	// Body is the row's body; Response the answer saved with the row,
	// not Shown when there is none.
	Body, Response Body
}

// Table is a table of a row's lines.
type Table struct {
	// ID names the table on the row page.
	ID string
	// Title is the heading the row page gives it; "" for the fields,
	// which follow the row's own heading.
	Title string
	// Columns head the table; nil for the fields, whose lines are each a
	// name and its value.
	Columns []Column
	Lines   []Line
	// Empty is what stands for a table with no lines; "" leaves the
	// table out.
	Empty string
	// Note follows the lines, when not "".
	Note string
}

// Column is a column of a Table.
type Column struct {
	// Head is the column's heading, in lower case; inbox show prints it
	// in capitals.
	Head string
	// Key names the column in a line's cell ids (Line.ID).
	Key string
}

// Line is a line of a Table.
type Line struct {
	// ID, when not "", names the line's cells on the row page: each is
	// ID-<its column's Key>.
	ID    string
	Cells []Cell
}

// Cell is a cell of a Line.
type Cell struct {
	// Text is the cell's text, escaped (bodyview.Printable); "-" when the
	// cell has none.
	Text string
	// Row is the id of the row the cell names, which the row page links
	// to and inbox show takes; "" when none.
	Row string
	// Destination is the destination the cell names, whose rows the rows
	// page lists; "" when none.
	Destination string
}

// Body is a body as it is shown: the first bodyview.Limit bytes of its
// rendering.
type Body struct {
	Shown bool
	// What names it: "body", or "answer saved with the row".
	What string
	// Empty is true when there is no byte to show.
	Empty bool
	bodyview.View
}

// Cut says, when the body was cut at bodyview.Limit, how much was left
// out; "" when it is shown whole.
func (b Body) Cut() string {
	if b.Left == 0 {
		return ""
	}
	if b.What == whatBody {
		return fmt.Sprintf("truncated: the first %d KiB shown, %d bytes of the body left out; inbox show --json has it whole", bodyview.Limit>>10, b.Left)
	}
	return fmt.Sprintf("truncated: the first %d KiB shown, %d bytes of the %s left out", bodyview.Limit>>10, b.Left, b.What)
}

const whatBody = "body"

// Read reads the row id (inbox.ErrNotFound, wrapped, when there is none),
// its destinations and the other rows of its job, and returns it as it is
// shown. It fails as the store's reads do.
func Read(ctx context.Context, s Store, id string) (Row, error) {
	e, err := s.Get(ctx, id)
	if err != nil {
		return Row{}, err
	}
	pairs, err := s.Deliveries(ctx, e.ID)
	if err != nil {
		return Row{}, err
	}
	var job []inbox.Event
	if e.JobID != "" {
		if job, err = s.List(ctx, inbox.Filter{Job: e.JobID, Limit: MaxJobRows + 2}); err != nil {
			return Row{}, fmt.Errorf("read the rows of job %s: %w", e.JobID, err)
		}
		job = slices.DeleteFunc(job, func(r inbox.Event) bool { return r.ID == e.ID })
	}
	return Of(e, pairs, job), nil
}

// Of returns e as it is shown, with its pairs and the other rows of its
// job (newest first; those past MaxJobRows are left out, and a note says
// so).
func Of(e inbox.Event, pairs []inbox.Pairing, job []inbox.Event) Row {
	r := Row{Event: e, Pairs: pairs, Body: Body{Shown: true, What: whatBody, Empty: len(e.Body) == 0, View: bodyview.Show(e.Body)}}
	if e.Response != nil {
		r.Response = Body{Shown: true, What: "answer saved with the row", Empty: len(e.Response) == 0, View: bodyview.Show(e.Response)}
	}
	r.Tables = append(r.Tables, fields(e), destinations(e, pairs))
	if t, ok := earlier(pairs); ok {
		r.Tables = append(r.Tables, t)
	}
	if len(job) > 0 {
		r.Tables = append(r.Tables, jobRows(e, job))
	}
	return r
}

// fields is the row's fields, as inbox.EventFields lists them.
func fields(e inbox.Event) Table {
	t := Table{ID: "fields"}
	for _, f := range inbox.EventFields() {
		t.Lines = append(t.Lines, Line{Cells: []Cell{{Text: f.Name}, text(f.Text(e))}})
	}
	return t
}

// destinations is where the row stands with each destination it is for.
func destinations(e inbox.Event, pairs []inbox.Pairing) Table {
	t := Table{ID: "destinations", Title: "Destinations", Columns: []Column{
		{"destination", "destination"}, {"status", "status"}, {"attempts", "attempts"}, {"next attempt", "next-attempt"},
		{"lease", "lease"}, {"updated", "updated"}, {"done", "done"}, {"last error", "last-error"},
	}}
	t.Empty = "the row is for no destination"
	if e.Status == inbox.StatusNew {
		t.Empty += " yet: it is routed when a dispatcher next claims rows"
	}
	for _, p := range pairs {
		lease := ""
		if p.LeaseOwner != "" {
			lease = p.LeaseOwner + " until " + inbox.FormatTime(p.LeaseUntil)
		}
		t.Lines = append(t.Lines, Line{ID: "pair-" + p.Destination, Cells: []Cell{
			destination(p.Destination), text(status(p.Status, p.Reason)), text(strconv.FormatInt(p.Attempts, 10)),
			text(inbox.FormatTime(p.NextAttemptAt)), text(lease), text(inbox.FormatTime(p.UpdatedAt)),
			text(inbox.FormatTime(p.DoneAt)), text(p.LastError),
		}})
	}
	return t
}

// earlier is the series of attempts a replay replaced, a line each, by
// destination; ok is false when there is none.
func earlier(pairs []inbox.Pairing) (t Table, ok bool) {
	t = Table{ID: "earlier", Title: "Earlier series", Columns: []Column{{"destination", "destination"}, {"earlier series", "series"}}}
	for _, p := range pairs {
		for _, s := range p.Earlier {
			t.Lines = append(t.Lines, Line{Cells: []Cell{destination(p.Destination), text(series(s))}})
		}
	}
	return t, len(t.Lines) > 0
}

// jobRows is the other rows of e's job: its own row, or the rows kept
// beside it.
func jobRows(e inbox.Event, job []inbox.Event) Table {
	t := Table{ID: "job", Title: "Rows of the same job", Columns: []Column{
		{"row of the same job", "id"}, {"kept as", "as"}, {"status", "status"}, {"received", "received"},
	}}
	if len(job) > MaxJobRows {
		job = job[:MaxJobRows]
		t.Note = fmt.Sprintf("the newest %d of the job's other rows are listed", MaxJobRows)
	}
	for _, r := range job {
		as := "kept beside the job's row"
		switch {
		case r.ID == e.JobID:
			as = "the job's row"
		case e.ID == e.JobID:
			as = "kept beside this row"
		}
		t.Lines = append(t.Lines, Line{Cells: []Cell{
			{Text: bodyview.Printable(r.ID, ""), Row: r.ID}, text(as), text(status(r.Status, r.Reason)), text(inbox.FormatTime(r.ReceivedAt)),
		}})
	}
	return t
}

// series is a line of an earlier series of a destination's attempts:
// "series 1: 3 attempts, done 2026-12-01T09:00:00Z, replayed at
// 2026-12-02T10:00:00Z", and its last error when it had one. It is not
// escaped.
func series(h inbox.Series) string {
	attempts := "attempts"
	if h.Attempts == 1 {
		attempts = "attempt"
	}
	at := h.UpdatedAt
	if !h.DoneAt.IsZero() {
		at = h.DoneAt
	}
	line := fmt.Sprintf("series %d: %d %s, %s %s, replayed at %s", h.N, h.Attempts, attempts, status(h.Status, h.Reason),
		inbox.FormatTime(at), inbox.FormatTime(h.ReplayedAt))
	if h.LastError != "" {
		line += ", last error: " + h.LastError
	}
	return line
}

// status is a status with its reason: "parked (conflict)".
func status(s inbox.Status, r inbox.Reason) string {
	if r == "" {
		return string(s)
	}
	return string(s) + " (" + string(r) + ")"
}

// text is a cell of s, escaped; "-" when s is "".
func text(s string) Cell {
	if s == "" {
		return Cell{Text: "-"}
	}
	return Cell{Text: bodyview.Printable(s, "")}
}

// destination is a cell naming the destination name.
func destination(name string) Cell {
	c := text(name)
	c.Destination = name
	return c
}
