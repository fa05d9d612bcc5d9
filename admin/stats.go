package admin

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/config"
	"inbox/dbaddr"
	"inbox/inbox"
	"inbox/replica"
)

func statsCommand(open Opener) *cli.Command {
	return watched(&cli.Command{
		Name:  "stats",
		Usage: "count rows per status and parked rows per reason; show the delivery queue",
		Description: `Counts rows per status, with the delivery attempts recorded on them (on
done rows, what it took to hand them on; on parked rows, what was tried
before giving up), the queue of new rows the application still has to take
(how many, how many a dispatcher holds now, how many wait for a retry, how
long the oldest has waited), and parked rows per reason (handler_failed,
handler_rejected and too_large_for_destination are the dispatcher's). Then, per destination, where its
rows stand: new (waiting for it, in flight or retrying among them), done,
parked for it alone, and its state: paused (by an operator, inbox pause),
down (a dispatcher found it down: no answer, timeouts, 429, 502-504, or
the same failure for several rows in a row; its rows wait with no attempt
counted while it is probed; --json gives since when and the last failure)
or up (- in the table).

With --watch [INTERVAL] it redraws them every INTERVAL (default 2s, at
least 100ms) until interrupted (Ctrl-C: exit 0); each read is cut off
after the interval or 5s, whichever is longer. With --json it prints one
object per line each time.

Examples:
   inbox stats
   inbox stats --json | jq .queue
   inbox stats --json | jq '.destinations[] | select(.paused)'
   inbox stats --json | jq '.destinations[] | select(.state == "down")'
   inbox stats --watch
   inbox stats --watch 10s
   inbox stats --watch 5s --json`,
		Flags: []cli.Flag{config.DBFlag(), readTimeoutFlag(), jsonFlag(), watchFlag()},
		Action: func(c *cli.Context) error {
			if err := noArgsButWatch(c); err != nil {
				return err
			}
			ctx, cancel, err := readContext(c)
			if err != nil {
				return err
			}
			defer cancel()
			store, err := openRead(c, open)
			if err != nil {
				return err
			}
			defer store.Close()
			st, err := store.Stats(ctx)
			if err != nil {
				return stopped(c, ctx, err, 0)
			}
			dests, err := store.Destinations(ctx, time.Now())
			if err != nil {
				return stopped(c, ctx, err, 0)
			}
			rep := replicaStatus(c.String("db"))
			w := c.App.Writer
			if c.Bool("json") {
				// The age rides in the queue object, so jq .queue has it.
				type queue struct {
					inbox.Queue
					OldestAge float64 `json:"oldest_waiting_seconds"`
				}
				return json.NewEncoder(w).Encode(struct {
					inbox.Stats
					Queue        queue                    `json:"queue"`
					Destinations []inbox.DestinationStats `json:"destinations"`
					Replica      *replica.Status          `json:"replica,omitempty"`
				}{st, queue{st.Queue, st.Queue.Age(time.Now()).Seconds()}, dests, rep})
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "STATUS\tROWS\tATTEMPTS")
			for _, s := range inbox.Statuses() {
				fmt.Fprintf(tw, "%s\t%d\t%d\n", s, st.ByStatus[s], st.Attempts[s])
			}
			q := st.Queue
			fmt.Fprintln(tw, "\nQUEUE\t")
			fmt.Fprintf(tw, "waiting\t%d\n", q.Depth)
			fmt.Fprintf(tw, "in flight\t%d\n", q.InFlight)
			fmt.Fprintf(tw, "retrying\t%d\n", q.Retrying)
			oldest := "-"
			if q.Depth > 0 {
				oldest = formatDuration(q.Age(time.Now()).Round(time.Second))
			}
			fmt.Fprintf(tw, "oldest waiting\t%s\n", oldest)
			if len(st.BySource) > 0 {
				fmt.Fprintln(tw, "\nSOURCE\tNEW\tDONE\tPARKED\tIGNORED\tDISMISSED")
				sources := make([]string, 0, len(st.BySource))
				for s := range st.BySource {
					sources = append(sources, s)
				}
				slices.Sort(sources)
				for _, s := range sources {
					n := st.BySource[s]
					fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\n", cell(s), n[inbox.StatusNew], n[inbox.StatusDone], n[inbox.StatusParked],
						n[inbox.StatusIgnored], n[inbox.StatusDismissed])
				}
			}
			if len(st.ByReason) > 0 {
				fmt.Fprintln(tw, "\nPARKED REASON\tROWS")
				reasons := make([]inbox.Reason, 0, len(st.ByReason))
				for r := range st.ByReason {
					reasons = append(reasons, r)
				}
				slices.Sort(reasons)
				for _, r := range reasons {
					fmt.Fprintf(tw, "%s\t%d\n", cell(string(r)), st.ByReason[r])
				}
			}
			if len(dests) > 0 {
				fmt.Fprintln(tw, "\nDESTINATION\tNEW\tIN FLIGHT\tRETRYING\tDONE\tPARKED\tDISMISSED\tSTATE")
				for _, d := range dests {
					paused := "-"
					switch {
					case d.Paused:
						paused = "paused"
					case !d.DownSince.IsZero():
						paused = "down for " + formatDuration(time.Since(d.DownSince).Round(time.Second))
					}
					fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", cell(d.Name), d.ByStatus[inbox.StatusNew], d.InFlight, d.Retrying,
						d.ByStatus[inbox.StatusDone], d.ByStatus[inbox.StatusParked], d.ByStatus[inbox.StatusDismissed], paused)
				}
			}
			if rep != nil {
				printReplica(tw, *rep, time.Now())
			}
			return tw.Flush()
		},
	})
}

// replicaStatus is what serve saved of the replica of the SQLite file at
// db (serve --replica), its lag brought up to now; nil when there is none.
func replicaStatus(db string) *replica.Status {
	if dbaddr.IsPostgres(db) {
		return nil
	}
	st, err := replica.ReadStatus(db)
	if err != nil {
		return nil
	}
	st.Lag = st.LagAt(time.Now()).Seconds()
	return &st
}

// printReplica prints the REPLICA section of stats.
func printReplica(tw io.Writer, st replica.Status, now time.Time) {
	fmt.Fprintln(tw, "\nREPLICA\t")
	fmt.Fprintf(tw, "url\t%s\n", cell(st.URL))
	mode := "trails the file by about a second"
	if st.Sync {
		mode = "deliveries wait for it (--replica-sync)"
	}
	fmt.Fprintf(tw, "mode\t%s\n", mode)
	fmt.Fprintf(tw, "behind by\t%s\n", formatDuration(time.Duration(st.Lag*float64(time.Second)).Round(100*time.Millisecond)))
	last := "never"
	if !st.LastSuccess.IsZero() {
		last = fmt.Sprintf("%s (%s ago)", formatTime(st.LastSuccess), formatDuration(now.Sub(st.LastSuccess).Round(time.Second)))
	}
	fmt.Fprintf(tw, "last success\t%s\n", last)
	fmt.Fprintf(tw, "failed syncs\t%d\n", st.Errors)
	switch {
	case st.Stopped:
		fmt.Fprintln(tw, "state\tserve stopped; the replica holds every commit")
	case st.Error != "":
		fmt.Fprintf(tw, "state\tcannot be reached: %s\n", cell(st.Error))
	case now.Sub(st.At) > 10*time.Second:
		fmt.Fprintf(tw, "state\tserve saved no status since %s: is it running?\n", formatTime(st.At))
	default:
		fmt.Fprintln(tw, "state\tok")
	}
}
