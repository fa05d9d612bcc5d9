package admin

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/inbox"
)

// late is what alert reports beside parked rows: keys refused and not
// delivered since --missed-after, expected jobs past their window,
// destinations with unfinished rows that no running dispatcher has, and
// running dispatchers that route by different destination tables.
type late struct {
	after    time.Duration
	missed   []inbox.Refusal
	overdue  []inbox.Expectation
	stranded []inbox.Stranded
	tables   []inbox.RoutingTable
}

func lateJobs(c *cli.Context, store inbox.Store) (late, error) {
	after, err := age(c, "missed-after")
	if err != nil {
		return late{}, err
	}
	now := time.Now()
	l := late{after: after}
	if l.missed, err = store.Missed(c.Context, now.Add(-after)); err != nil {
		return late{}, err
	}
	if l.overdue, err = store.Expected(c.Context, now, true); err != nil {
		return late{}, err
	}
	// Only while a dispatcher runs: with none, nothing is routed at all,
	// and which destinations are meant is not known.
	live, err := store.Routings(c.Context, now.Add(-inbox.RoutingLive))
	if err != nil || len(live) == 0 {
		return l, err
	}
	stats, err := store.Destinations(c.Context, now)
	if err != nil {
		return late{}, err
	}
	l.stranded = inbox.StrandedDestinations(stats, inbox.LiveNames(live))
	l.tables = inbox.ConflictingRoutings(live)
	return l, nil
}

func (l late) empty() bool {
	return len(l.missed) == 0 && len(l.overdue) == 0 && len(l.stranded) == 0 && len(l.tables) == 0
}

func (l late) print(w io.Writer) {
	for _, m := range l.missed {
		fmt.Fprintf(w, "missed %s\t%s refused %d times, first %s, not delivered since\t(inbox missed; inbox redeliver --missed)\n",
			idCell(m.Key), cell(m.Source), m.Count, formatTime(m.First))
	}
	for _, e := range l.overdue {
		fmt.Fprintf(w, "overdue %s\texpected by %s, %d polls, %d redeliveries\t(inbox expected --overdue)\n",
			idCell(e.JobID), formatTime(e.DueAt), e.Polls, e.Redeliveries)
	}
	for _, d := range l.stranded {
		fmt.Fprintf(w, "unconfigured %s	%d unfinished rows wait and no running dispatcher has this destination	(inbox stats; name it in a config again, or see inbox replay --help)\n",
			cell(d.Name), d.New)
	}
	if len(l.tables) > 0 {
		var parts []string
		for _, t := range l.tables {
			parts = append(parts, fmt.Sprintf("%d routing by [%s]", len(t.Owners), cell(strings.Join(t.Destinations, ", "))))
		}
		fmt.Fprintf(w, "routing	the running dispatchers route new rows by different destination tables: %s	(give them the same; inbox replay --destination NAME --config FILE --missing-only)\n",
			strings.Join(parts, "; "))
	}
}

func (l late) printJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	for _, m := range l.missed {
		if err := enc.Encode(map[string]any{"missed": m}); err != nil {
			return err
		}
	}
	for _, e := range l.overdue {
		if err := enc.Encode(map[string]any{"overdue": e}); err != nil {
			return err
		}
	}
	for _, d := range l.stranded {
		if err := enc.Encode(map[string]any{"unconfigured_destination": d}); err != nil {
			return err
		}
	}
	if len(l.tables) > 0 {
		if err := enc.Encode(map[string]any{"routing_tables": l.tables}); err != nil {
			return err
		}
	}
	return nil
}
