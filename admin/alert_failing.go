package admin

import (
	"encoding/json"
	"fmt"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/inbox"
)

// alertFailing reports each watched source (every one with failures when
// sources is nil) whose requests failed verification within window, at
// least --min-count of them, none verified since the first of them.
func alertFailing(c *cli.Context, open Opener, window time.Duration, sources []string, rep *report) error {
	store, err := openRead(c, open)
	if err != nil {
		return err
	}
	defer store.Close()
	runs, err := store.Unverified(c.Context)
	if err != nil {
		return err
	}
	uses, err := store.SecretUses(c.Context)
	if err != nil {
		return err
	}
	if sources != nil {
		runs = slices.DeleteFunc(runs, func(r inbox.Unverified) bool { return !slices.Contains(sources, r.Source) })
	}
	tw := tabwriter.NewWriter(&rep.text, 0, 0, 2, ' ', 0)
	enc := json.NewEncoder(&rep.json)
	for _, b := range inbox.BrokenRotations(runs, uses, time.Now().Add(-window), c.Int64("min-count")) {
		last := "never verified a delivery"
		if !b.LastVerified.IsZero() {
			last = "last verified " + formatTime(b.LastVerified)
		}
		fmt.Fprintf(tw, "failing %s\ta broken secret rotation? %s requests failed verification since %s, none verified\tlast failed %s, %s\t(inbox sources)\n",
			cell(b.Source), thousands(b.Count), formatTime(b.First), formatTime(b.Last), last)
		if err := enc.Encode(b); err != nil {
			return err
		}
	}
	return tw.Flush()
}
