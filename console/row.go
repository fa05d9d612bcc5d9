package console

import (
	"errors"
	"net/http"

	"inbox/bodyview"
	"inbox/inbox"
	"inbox/rowview"
)

// rowPage is one row as inbox show prints it: the same tables, read by
// rowview.
type rowPage struct {
	Title string
	Row   rowview.Row
}

func (c *Console) row(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if id == "" {
		c.problem(w, http.StatusBadRequest, "Which row? The row page takes ?id=.", nil)
		return
	}
	ctx, cancel := c.read(r)
	defer cancel()
	row, err := rowview.Read(ctx, c.store, id)
	if errors.Is(err, inbox.ErrNotFound) {
		c.problem(w, http.StatusNotFound, "No row with id "+printable(id)+".", nil)
		return
	}
	if err != nil {
		c.storeFailed(w, err)
		return
	}
	c.render(w, http.StatusOK, "row", rowPage{Title: "Row " + printable(row.Event.ID), Row: row})
}

// cellLink is where a cell of a row's table leads: the page of the row it
// names, or the rows of the destination it names; "" when nowhere.
func cellLink(cell rowview.Cell) string {
	switch {
	case cell.Row != "":
		return rowLink(cell.Row)
	case cell.Destination != "":
		return rowsLink(inbox.Filter{Destination: cell.Destination})
	}
	return ""
}

// printable returns s with every rune that is not printable (controls,
// bidi overrides, invalid UTF-8) written as a Go escape, as inbox show
// prints it, so what the page shows is what the row holds; html/template
// then escapes the markup.
func printable(s string) string { return bodyview.Printable(s, "") }
