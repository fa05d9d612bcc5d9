package rowview_test

import (
	"strconv"
	"testing"
	"time"

	"inbox/inbox"
	"inbox/rowview"
)

// TestTablesAreWhole checks that every line of every table has a cell for
// each column (the fields a name and a value), that text is escaped, and
// that the job's other rows are bounded, a note saying so.
func TestTablesAreWhole(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	e := inbox.Event{ID: "job_1", JobID: "job_1", Source: "sume", Status: inbox.StatusDone, Event: "job.\x1b[2Jcompleted", ReceivedAt: at, Body: []byte(`{}`)}
	pairs := []inbox.Pairing{{Destination: "app", Status: inbox.StatusDone, Attempts: 1, UpdatedAt: at, DoneAt: at,
		Earlier: []inbox.Series{{N: 1, Attempts: 2, Status: inbox.StatusParked, Reason: inbox.ReasonHandlerFailed, UpdatedAt: at, ReplayedAt: at, LastError: "HTTP 500\r"}}}}
	var job []inbox.Event
	for i := range rowview.MaxJobRows + 1 {
		job = append(job, inbox.Event{ID: "sha256:" + strconv.Itoa(i), JobID: "job_1", Status: inbox.StatusParked, Reason: inbox.ReasonConflict, ReceivedAt: at})
	}
	r := rowview.Of(e, pairs, job)
	var ids []string
	for _, tb := range r.Tables {
		ids = append(ids, tb.ID)
		for _, l := range tb.Lines {
			if want := max(len(tb.Columns), 2); len(l.Cells) != want {
				t.Errorf("table %s: a line of %d cells, want %d", tb.ID, len(l.Cells), want)
			}
			for _, c := range l.Cells {
				if c.Text == "" {
					t.Errorf("table %s: an empty cell, want -", tb.ID)
				}
			}
		}
	}
	if want := []string{"fields", "destinations", "earlier", "job"}; len(ids) != len(want) {
		t.Fatalf("tables %v, want %v", ids, want)
	}
	if got := r.Tables[1].Lines[0].Cells[0]; got.Destination != "app" {
		t.Errorf("the destination cell %+v names no destination", got)
	}
	if got := r.Tables[2].Lines[0].Cells[1].Text; got != `series 1: 2 attempts, parked (handler_failed) 2026-12-01T09:00:00Z, replayed at 2026-12-01T09:00:00Z, last error: HTTP 500\x0d` {
		t.Errorf("the earlier series reads %q", got)
	}
	for _, l := range r.Tables[0].Lines {
		if l.Cells[0].Text == "event" && l.Cells[1].Text != `job.\x1b[2Jcompleted` {
			t.Errorf("the event field reads %q, want it escaped", l.Cells[1].Text)
		}
	}
	jobRows := r.Tables[3]
	if len(jobRows.Lines) != rowview.MaxJobRows || jobRows.Note == "" {
		t.Errorf("the job's rows: %d lines, note %q; want %d and a note", len(jobRows.Lines), jobRows.Note, rowview.MaxJobRows)
	}
	if c := jobRows.Lines[0].Cells; c[0].Row != "sha256:0" || c[1].Text != "kept beside this row" || c[2].Text != "parked (conflict)" {
		t.Errorf("the job's first other row: %+v", c)
	}
}
