package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"inbox/inbox"
)

// The list page's --limit: its default, as inbox list's, and its most, so
// a page stays one a browser renders.
const (
	defaultLimit = 100
	maxLimit     = 1000
)

type rowsPage struct {
	Title    string
	Filter   inbox.Filter
	Limit    string // as asked, for the form
	Statuses []inbox.Status
	Reasons  []inbox.Reason
	Rows     []listRow
	// Total counts what the filter selects when the limit cut the list;
	// -1 when it did not.
	Total int64
}

type listRow struct {
	Event inbox.Event
	Link  string
}

func (c *Console) rows(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r.URL.Query())
	if err != nil {
		c.problem(w, http.StatusBadRequest, err.Error(), nil)
		return
	}
	ctx, cancel := c.read(r)
	defer cancel()
	events, err := c.store.List(ctx, f)
	if err != nil {
		c.storeFailed(w, err)
		return
	}
	p := rowsPage{Title: "Rows", Filter: f, Limit: strconv.Itoa(f.Limit), Statuses: inbox.Statuses(), Reasons: inbox.Reasons(), Total: -1}
	for _, e := range events {
		p.Rows = append(p.Rows, listRow{Event: e, Link: rowLink(e.ID)})
	}
	if len(events) == f.Limit {
		// Counted after the rows were read, as inbox list does: rows stored
		// meanwhile only make the total larger.
		if p.Total, err = c.store.Count(ctx, f); err != nil {
			c.storeFailed(w, err)
			return
		}
	}
	c.render(w, http.StatusOK, "rows", p)
}

// parseFilter reads the list page's query: status, source, reason,
// destination and limit, as inbox list takes them (and --reason, as inbox
// parked does), and job, the rows of one job (the row page links to
// them). A value it cannot take is an error that names it.
func parseFilter(q url.Values) (inbox.Filter, error) {
	f := inbox.Filter{Source: q.Get("source"), Status: inbox.Status(q.Get("status")), Reason: inbox.Reason(q.Get("reason")),
		Destination: q.Get("destination"), Job: q.Get("job"), Limit: defaultLimit}
	if f.Status != "" && !f.Status.Valid() {
		return f, fmt.Errorf("unknown status %q: want new, done, parked or ignored", f.Status)
	}
	if f.Reason != "" && !f.Reason.Valid() {
		return f, fmt.Errorf("unknown reason %q: want one of those the overview lists", f.Reason)
	}
	// A name no source has selects nothing; only its length is bounded.
	if len(f.Source) > 64 {
		return f, fmt.Errorf("source %q: a source name is 1 to 32 of a-z, 0-9, - and _", f.Source)
	}
	if len(f.Destination) > 64 {
		return f, fmt.Errorf("destination %q: a destination name is 1 to 32 of a-z, 0-9, - and _", f.Destination)
	}
	// A job's row id: a job id of at most 200 bytes within its source.
	if len(f.Job) > 300 {
		return f, fmt.Errorf("job %q: a job's row id is at most 200 bytes and its source's name", f.Job)
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxLimit {
			return f, fmt.Errorf("limit %q: want 1 to %d rows", s, maxLimit)
		}
		f.Limit = n
	}
	return f, nil
}

// rowsLink is the list page's URL for f, its values query-escaped.
func rowsLink(f inbox.Filter) string {
	q := url.Values{}
	for k, v := range map[string]string{"status": string(f.Status), "source": f.Source, "reason": string(f.Reason),
		"destination": f.Destination, "job": f.Job} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.Limit > 0 && f.Limit != defaultLimit {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	if len(q) == 0 {
		return "/rows"
	}
	return "/rows?" + q.Encode()
}

// rowLink is the row page's URL of id, which goes in the query: an id may
// hold a slash (another source's <source>/<key>), quotes or anything else
// a job id may.
func rowLink(id string) string {
	return "/row?" + url.Values{"id": {id}}.Encode()
}
