package admin

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/config"
	"inbox/inbox"
)

// defaultScanLimit bounds --contains: the newest 100,000 rows are read in
// a few seconds on either store, and hold about a day of a busy inbox.
const defaultScanLimit = 100_000

// findFlags are the flags list and parked find rows with, each with an
// environment variable named env+the flag's (INBOX_LIST_EVENT); sinceEnv
// is --since's, which parked has had longer than the rest, and sinceMore
// what else --since says, if anything.
func findFlags(env, sinceEnv, sinceMore string) []cli.Flag {
	return append(selectFlags(env, sinceEnv, sinceMore),
		&cli.StringFlag{Name: "contains", Usage: "only rows whose body holds this text, byte for byte (case-sensitive; % and _ are themselves), of the newest --scan-limit rows the other filters select", EnvVars: []string{env + "CONTAINS"}},
		&cli.IntFlag{Name: "scan-limit", Usage: "with --contains, search the bodies of at most this many rows, newest first; 0 for all", Value: defaultScanLimit, EnvVars: []string{env + "SCAN_LIMIT"}},
	)
}

// selectFlags are the findFlags that select rows by what is stored beside
// the body (replay takes these).
func selectFlags(env, sinceEnv, sinceMore string) []cli.Flag {
	return []cli.Flag{
		whenFlag("since", "only rows received at or after this time, or within this long"+sinceMore, sinceEnv),
		whenFlag("until", "only rows received before this time, or before this long ago", env+"UNTIL"),
		&cli.StringFlag{Name: "event", Usage: "only rows of this event (job.completed, ...), exactly", EnvVars: []string{env + "EVENT"}},
		&cli.StringFlag{Name: "job-status", Usage: "only rows whose body gives this job status (COMPLETED, ERROR, ...), exactly", EnvVars: []string{env + "JOB_STATUS"}},
		&cli.StringFlag{Name: "destination", Usage: "only rows routed to this destination (a [[destination]] name; default for the single-destination flags), whatever became of them there", EnvVars: []string{env + "DESTINATION"}},
	}
}

// findFilter adds what the findFlags ask for to f; --since is left out
// when skipSince (parked --per-hour reads it as a span).
func findFilter(c *cli.Context, f *inbox.Filter, now time.Time, skipSince bool) error {
	if err := selectFilter(c, f, now, skipSince); err != nil {
		return err
	}
	if c.IsSet("contains") && c.String("contains") == "" {
		return fmt.Errorf("--contains: want the text to look for")
	}
	f.Contains = c.String("contains")
	if f.ScanLimit = c.Int("scan-limit"); f.ScanLimit < 0 {
		return fmt.Errorf("--scan-limit %d: want 0 (every row) or more", f.ScanLimit)
	}
	return nil
}

// selectFilter adds what the selectFlags ask for to f, as findFilter does.
func selectFilter(c *cli.Context, f *inbox.Filter, now time.Time, skipSince bool) error {
	var err error
	if !skipSince {
		if f.Since, err = when(c, "since", now); err != nil {
			return err
		}
	}
	if f.Before, err = when(c, "until", now); err != nil {
		return err
	}
	if !f.Since.IsZero() && !f.Before.IsZero() && !f.Since.Before(f.Before) {
		return fmt.Errorf("--since %q is not before --until %q: no row is received in between", c.String("since"), c.String("until"))
	}
	f.Event, f.JobStatus = c.String("event"), c.String("job-status")
	if f.Destination = c.String("destination"); f.Destination != "" && !config.ValidName(f.Destination) {
		return fmt.Errorf("--destination %q: a destination name is 1 to 32 of a-z, 0-9, - and _", f.Destination)
	}
	return nil
}

// scanNote says on stderr when --scan-limit cut the search f made short:
// when more rows than it passed the other filters.
func scanNote(ctx context.Context, c *cli.Context, store inbox.Store, f inbox.Filter) error {
	if f.Contains == "" || f.ScanLimit == 0 {
		return nil
	}
	n, err := store.Count(ctx, f.Scan())
	if err != nil {
		return err
	}
	if n > int64(f.ScanLimit) {
		fmt.Fprintf(c.App.ErrWriter, "scanned the newest %s rows; older ones not searched: raise --scan-limit\n", thousands(int64(f.ScanLimit)))
	}
	return nil
}

// whenFlag is a flag that takes a time, RFC 3339, or an age (see when).
func whenFlag(name, usage, env string) *cli.StringFlag {
	return &cli.StringFlag{Name: name, Usage: usage + " (2026-12-01T09:00:00Z, 90m, 24h, 30d)", EnvVars: []string{env}}
}

// when reads a whenFlag: the zero time when it is empty, the time when it
// is RFC 3339, else now less the age it reads as (as age reads it). It
// fails on anything else.
func when(c *cli.Context, name string, now time.Time) (time.Time, error) {
	s := strings.TrimSpace(c.String(name))
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if d, ok := parseAge(s); ok {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("--%s %q: want a time such as 2026-12-01T09:00:00Z or an age such as 90m, 24h or 30d", name, c.String(name))
}
