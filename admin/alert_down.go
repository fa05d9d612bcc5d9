package admin

import (
	"fmt"
	"slices"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/inbox"
)

// downFinding is what alert --down-for --json prints of a destination
// down too long.
type downFinding struct {
	Destination string    `json:"destination"`
	Since       time.Time `json:"down_since"`
	Seconds     float64   `json:"down_seconds"`
}

// alertDown reports each destination a dispatcher has found down for
// longer than d (its rows waiting, no attempt counted), but those no
// running dispatcher has, which no one probes: an operator paused it, or
// its dispatcher stopped (a stopped dispatcher leaves its record for the
// next one, which takes the outage over; the unconfigured check says
// what waits for one that never comes back). The cause is left out: it
// may name the application's host, and the notice goes outside.
func alertDown(c *cli.Context, store inbox.Store, d time.Duration, rep *report) error {
	down, err := store.DownDestinations(c.Context)
	if err != nil {
		return err
	}
	paused, err := store.PausedDestinations(c.Context)
	if err != nil {
		return err
	}
	now := time.Now()
	live, err := store.Routings(c.Context, now.Add(-inbox.RoutingLive))
	if err != nil {
		return err
	}
	probed := inbox.LiveNames(live)
	for _, dd := range down {
		long := now.Sub(dd.Since)
		if long < d || slices.Contains(paused, dd.Name) || !slices.Contains(probed, dd.Name) {
			continue
		}
		line := fmt.Sprintf("down %s\tfor %s, since %s\tits rows wait, no attempt counted, probed until it answers\t(inbox stats)",
			cell(dd.Name), formatDuration(long.Round(time.Second)), formatTime(dd.Since))
		if err := rep.add("down "+idCell(dd.Name), 1, downFinding{dd.Name, dd.Since, long.Seconds()}, line); err != nil {
			return err
		}
	}
	return nil
}
