package admin

import (
	"fmt"
	"slices"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/inbox"
)

// alertFailing reports each watched source (every one with failures when
// sources is nil) whose requests failed verification within window, at
// least --min-count of them, none verified since the first of them.
func alertFailing(c *cli.Context, store inbox.Store, window time.Duration, sources []string, rep *report) error {
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
	for _, b := range inbox.BrokenRotations(runs, uses, time.Now().Add(-window), c.Int64("min-count")) {
		last := "never verified a delivery"
		if !b.LastVerified.IsZero() {
			last = "last verified " + formatTime(b.LastVerified)
		}
		line := fmt.Sprintf("failing %s\ta broken secret rotation? %s requests failed verification since %s, none verified\tlast failed %s, %s\t(inbox sources)",
			cell(b.Source), thousands(b.Count), formatTime(b.First), formatTime(b.Last), last)
		if err := rep.add("failing "+idCell(b.Source), b.Count, b, line); err != nil {
			return err
		}
	}
	return nil
}
