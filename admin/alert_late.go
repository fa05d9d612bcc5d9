package admin

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/inbox"
)

// late is what alert reports beside parked rows: keys refused and not
// delivered since --missed-after, and expected jobs past their window.
type late struct {
	after   time.Duration
	missed  []inbox.Refusal
	overdue []inbox.Expectation
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
	return l, nil
}

func (l late) empty() bool { return len(l.missed) == 0 && len(l.overdue) == 0 }

func (l late) print(w io.Writer) {
	for _, m := range l.missed {
		fmt.Fprintf(w, "missed %s\t%s refused %d times, first %s, not delivered since\t(inbox missed; inbox redeliver --missed)\n",
			idCell(m.Key), cell(m.Source), m.Count, formatTime(m.First))
	}
	for _, e := range l.overdue {
		fmt.Fprintf(w, "overdue %s\texpected by %s, %d polls, %d redeliveries\t(inbox expected --overdue)\n",
			idCell(e.JobID), formatTime(e.DueAt), e.Polls, e.Redeliveries)
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
	return nil
}
