package admin

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"inbox/inbox"
)

// knownStore is what knownDestination reads of the store.
type knownStore interface {
	Destinations(ctx context.Context, now time.Time) ([]inbox.DestinationStats, error)
	Routings(ctx context.Context, since time.Time) ([]inbox.Routing, error)
}

// knownDestination refuses a destination name the inbox does not know: a
// misspelt name would otherwise pause nothing (the real one going on),
// select nothing, or replay into pairs no dispatcher claims. Known are
// the names with pairs in the store (rows routed to them), the paused
// ones (so that inbox resume clears a pause of any name), those of a
// running dispatcher's routing, and those of configured (the
// [[destination]] tables of --config, where the command reads one). It
// fails too when the store cannot be read.
func knownDestination(ctx context.Context, store knownStore, name string, configured []inbox.Route) error {
	known, err := knownDestinations(ctx, store, configured)
	if err != nil {
		return err
	}
	if slices.Contains(known, name) {
		return nil
	}
	have := "none"
	if len(known) > 0 {
		have = strings.Join(known, ", ")
	}
	return fmt.Errorf("unknown destination %q: the known ones are %s (routed rows in the inbox, paused, of a running dispatcher or of --config); check the spelling (inbox stats lists them), or name a config that has it with --config FILE", name, have)
}

// knownDestinations returns the names knownDestination accepts, sorted.
func knownDestinations(ctx context.Context, store knownStore, configured []inbox.Route) ([]string, error) {
	now := time.Now()
	stats, err := store.Destinations(ctx, now)
	if err != nil {
		return nil, err
	}
	live, err := store.Routings(ctx, now.Add(-inbox.RoutingLive))
	if err != nil {
		return nil, err
	}
	names := append(inbox.LiveNames(live), inbox.RouteNames(configured)...)
	for _, d := range stats {
		names = append(names, d.Name)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}
