package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/config"
	"inbox/inbox"
	"inbox/sume"
)

// redeliverCommand builds redeliver; sleep waits between retries, a real
// timer when nil (tests pass one that does not sleep).
func redeliverCommand(open Opener, sleep func(context.Context, time.Duration) error) *cli.Command {
	return &cli.Command{
		Name:      "redeliver",
		Usage:     "ask the provider to send jobs' webhooks again",
		ArgsUsage: "[JOB_ID...]",
		Description: `Asks Sume to send each job's terminal webhook again (POST
/v1/jobs/{job_id}/webhook/redeliver), with a fresh timestamp; it lands on the
job's row, keyed by job_id. Needs an API key with the jobs:write scope, from
SUME_API_KEY (prefer it to --api-key: flags show in ps); the key is never
printed. Takes job ids, --reason for the jobs of every parked row with
that reason, or --missed for the Sume jobs inbox missed lists (refused with
503 and not delivered since): one of the three. Sume's jobs only: another source's row id
(<source>/<key>) in the database is refused, and --reason passes other
sources' rows over.
429 and 5xx answers are retried up to --retries times, as Retry-After says.
--api-url must be https, or http to a loopback host; redirects are never
followed, so the key goes nowhere else.
Prints one line per job and exits 1 if any failed.

Examples:
   SUME_API_KEY=... inbox redeliver job_1 job_2
   SUME_API_KEY=... inbox redeliver --reason payload_too_large
   inbox redeliver --reason unknown_event --dry-run
   SUME_API_KEY=... inbox redeliver --missed
   inbox redeliver --missed --dry-run`,
		Flags: []cli.Flag{
			config.DBFlag(),
			reasonFlag("redeliver the job of every parked row with this reason", "INBOX_REDELIVER_REASON"),
			&cli.BoolFlag{Name: "missed", Usage: "redeliver every Sume job inbox missed lists", EnvVars: []string{"INBOX_REDELIVER_MISSED"}},
			&cli.StringFlag{Name: "api-key", Usage: "Sume API key with jobs:write (prefer the environment variable)", EnvVars: []string{"SUME_API_KEY"}},
			&cli.StringFlag{Name: "api-url", Value: sume.DefaultAPIURL, Usage: "the Sume API's base URL", EnvVars: []string{"SUME_API_URL"}},
			&cli.IntFlag{Name: "retries", Value: sume.DefaultRetries, Usage: "how many times a 429 or 5xx answer is retried", EnvVars: []string{"INBOX_RETRIES"}},
			dryRunFlag(),
			jsonFlag(),
		},
		Action: func(c *cli.Context) error {
			r, err := reason(c)
			if err != nil {
				return err
			}
			jobs, err := idArgs(c)
			if err != nil {
				return err
			}
			if chosen := btoi(r != "") + btoi(len(jobs) > 0) + btoi(c.Bool("missed")); chosen != 1 {
				return errors.New("redeliver needs exactly one of: job ids, --reason or --missed")
			}
			if err := refuseOtherSources(c, open, jobs); err != nil {
				return err
			}
			if r != "" {
				if jobs, err = parkedJobs(c, open, r); err != nil {
					return err
				}
			}
			if c.Bool("missed") {
				if jobs, err = missedJobs(c, open); err != nil {
					return err
				}
			}
			if c.Int("retries") < 0 {
				return errors.New("--retries must be 0 or more")
			}
			client := &sume.Client{
				BaseURL: c.String("api-url"),
				APIKey:  c.String("api-key"),
				Retries: c.Int("retries"),
				Sleep:   sleep,
			}
			// Once, not once per job: a wrong URL is one line, not one per job.
			if err := client.Check(); err != nil {
				return fmt.Errorf("--api-url: %w", err)
			}
			if client.APIKey == "" && !c.Bool("dry-run") {
				return errors.New("no API key: set SUME_API_KEY (a key with jobs:write)")
			}
			w := c.App.Writer
			if len(jobs) == 0 {
				if !c.Bool("json") && c.Bool("missed") {
					fmt.Fprintln(w, "no Sume job is missed")
				} else if !c.Bool("json") {
					fmt.Fprintf(w, "no parked %s row names a job\n", r)
				}
				return nil
			}
			if err := c.Context.Err(); err != nil {
				return err // interrupted before the first request
			}
			enc := json.NewEncoder(w)
			failed := 0
			for _, job := range jobs {
				res := redeliverResult{JobID: job, OK: true}
				if !c.Bool("dry-run") {
					if err := client.Redeliver(c.Context, job); err != nil {
						res.OK, res.Error = false, err.Error()
						failed++
					}
				}
				if c.Bool("json") {
					if err := enc.Encode(res); err != nil {
						return err
					}
					continue
				}
				fmt.Fprintln(w, res.line(c.Bool("dry-run")))
			}
			if failed > 0 {
				return fmt.Errorf("redeliver: %d of %d jobs failed", failed, len(jobs))
			}
			return nil
		},
	}
}

// redeliverResult is one job's line.
type redeliverResult struct {
	JobID string `json:"job_id"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// line is the result for a terminal: the job id (from a body, through
// parked rows) and the API's error escaped and cut as table cells are.
func (r redeliverResult) line(dryRun bool) string {
	switch {
	case dryRun:
		return "would redeliver " + idCell(r.JobID)
	case r.OK:
		return "redelivered " + idCell(r.JobID)
	default:
		return fmt.Sprintf("failed %s: %s", idCell(r.JobID), escapeControls(r.Error, ""))
	}
}

// refuseOtherSources refuses an id that names another source's row
// (<source>/<key>): Sume's API knows nothing of it. Only ids holding a "/"
// can, and only those are looked up; a Sume job id may hold one too, so
// without a readable database (redeliver never needed one for ids) the ids
// are taken as Sume's.
func refuseOtherSources(c *cli.Context, open Opener, ids []string) error {
	if !slices.ContainsFunc(ids, func(id string) bool { return strings.Contains(id, "/") }) {
		return nil
	}
	store, err := openRead(c, open)
	if err != nil {
		return nil
	}
	defer store.Close()
	for _, id := range ids {
		if !strings.Contains(id, "/") {
			continue
		}
		e, err := store.Get(c.Context, id)
		if errors.Is(err, inbox.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if e.Source != inbox.DefaultSource {
			return fmt.Errorf("%s is a row of source %s: redeliver asks Sume's API, so it takes Sume job ids only", id, e.Source)
		}
	}
	return nil
}

// parkedJobs returns the job ids of the parked Sume rows with reason r,
// each once; rows that name no job, and other sources' rows (Sume's API
// knows nothing of them), are left out.
func parkedJobs(c *cli.Context, open Opener, r inbox.Reason) ([]string, error) {
	store, err := openRead(c, open)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	rows, err := store.List(c.Context, inbox.Filter{Source: inbox.DefaultSource, Status: inbox.StatusParked, Reason: r})
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var jobs []string
	for _, e := range rows {
		if e.JobID != "" && !seen[e.JobID] {
			seen[e.JobID] = true
			jobs = append(jobs, e.JobID)
		}
	}
	return jobs, nil
}

// missedJobs returns the Sume jobs of the refused keys not delivered since,
// each once; keys that name no job (a body that was not a job event), and
// other sources' keys, are left out.
func missedJobs(c *cli.Context, open Opener) ([]string, error) {
	store, err := openRead(c, open)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	missed, err := store.Missed(c.Context, time.Time{})
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var jobs []string
	for _, m := range missed {
		if m.Source == inbox.DefaultSource && m.JobID != "" && !seen[m.JobID] {
			seen[m.JobID] = true
			jobs = append(jobs, m.JobID)
		}
	}
	return jobs, nil
}
