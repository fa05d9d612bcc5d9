package admin

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/config"
	"inbox/inbox"
	"inbox/reconcile"
	"inbox/sume"
)

func expectCommand(open Opener) *cli.Command {
	return &cli.Command{
		Name:      "expect",
		Usage:     "record that the application started jobs and expects their deliveries",
		ArgsUsage: "JOB_ID...",
		Description: `Records each job as expected within --within (default 2h). serve (or
dispatch) with SUME_API_KEY polls a job not delivered by then: GET its
status (--status-url, else <SUME_API_URL>/v1/jobs/{job_id}) and, once it
has ended (COMPLETED, ERROR, CANCELED), asks Sume to redeliver it, so the
real signed event arrives through the webhook; while it runs it is polled
again later, with backoff; a job Sume does not know is closed with the
reason. A delivery of the job makes it done; a job already stored is done
at once. Expecting a job again moves its window. The same is POST /expect
on serve's --admin-addr, for applications that do not run the binary:
   curl -X POST http://127.0.0.1:8081/expect -d '{"job_id":"job_1","within":"2h"}'

Examples:
   inbox expect job_1
   inbox expect --within 30m job_1 job_2
   inbox expect --status-url https://api.sume.com/v1/jobs/job_1 job_1
   inbox expect --api-url http://127.0.0.1:9000 --status-url http://127.0.0.1:9000/v1/jobs/job_1 job_1`,
		Flags: []cli.Flag{
			config.DBFlag(),
			busyTimeoutFlag(),
			&cli.StringFlag{Name: "within", Value: "2h", Usage: "the delivery is due this long from now (1s to 30d: 90m, 2h, 2d)", EnvVars: []string{"INBOX_EXPECT_WITHIN"}},
			&cli.StringFlag{Name: "status-url", Usage: "where the job's status is read (one job only; on the --api-url host)", EnvVars: []string{"INBOX_EXPECT_STATUS_URL"}},
			&cli.StringFlag{Name: "api-url", Value: sume.DefaultAPIURL, Usage: "the Sume API's base URL: a status URL must be on its host", EnvVars: []string{"SUME_API_URL"}},
			jsonFlag(),
		},
		Action: func(c *cli.Context) error {
			ids, err := idArgs(c)
			if err != nil {
				return err
			}
			if len(ids) == 0 {
				return errNoJobs
			}
			within, err := reconcile.ParseWithin(c.String("within"))
			if err != nil {
				return fmt.Errorf("--%w", err)
			}
			client := &sume.Client{BaseURL: c.String("api-url")}
			if err := client.Check(); err != nil {
				return fmt.Errorf("--api-url: %w", err)
			}
			jobs, err := reconcile.ExpectRequest{JobIDs: ids, StatusURL: c.String("status-url")}.Jobs(func(u string) error {
				_, err := client.CheckStatusURL(u)
				return err
			})
			if err != nil {
				return err
			}
			store, err := openWrite(c, open)
			if err != nil {
				return err
			}
			defer store.Close()
			got, err := store.Expect(c.Context, jobs, c.String("status-url"), time.Now().Add(within))
			if err != nil {
				return err
			}
			if err := printExpectations(c, got); err != nil {
				return err
			}
			return store.Close()
		},
	}
}

func expectedCommand(open Opener) *cli.Command {
	return &cli.Command{
		Name:  "expected",
		Usage: "list the expected jobs and where each stands",
		Description: `Lists the jobs recorded by inbox expect (or POST /expect), due first:
STATE is waiting (not yet due), overdue (waiting past its window: polled at
Sume by serve or dispatch with SUME_API_KEY), done (delivered) or closed
(given up, see REASON). POLLS and REDELIVERIES count what the poller did,
JOB STATUS is what Sume last said.

Examples:
   inbox expected
   inbox expected --overdue
   inbox expected --json | jq -r 'select(.state == "closed") | .job_id'`,
		Flags: []cli.Flag{
			config.DBFlag(),
			&cli.BoolFlag{Name: "overdue", Usage: "only the jobs waiting past their window", EnvVars: []string{"INBOX_EXPECTED_OVERDUE"}},
			readTimeoutFlag(),
			jsonFlag(),
			wideFlag(),
		},
		Action: func(c *cli.Context) error {
			if err := config.NoArgs(c); err != nil {
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
			got, err := store.Expected(ctx, time.Now(), c.Bool("overdue"))
			if err != nil {
				return stopped(c, ctx, err, 0)
			}
			return printExpectations(c, got)
		},
	}
}

// expectState is an expectation's state as tables show it: overdue for
// one waiting past its window.
func expectState(e inbox.Expectation) string {
	if e.Overdue {
		return "overdue"
	}
	return string(e.State)
}

func printExpectations(c *cli.Context, got []inbox.Expectation) error {
	if got == nil {
		got = []inbox.Expectation{}
	}
	return printRows(c, got, "JOB\tSTATE\tDUE\tPOLLS\tREDELIVERIES\tJOB STATUS\tREASON", func(e inbox.Expectation) []string {
		reason := e.Reason
		if reason == "" && e.LastError != "" {
			reason = "last poll: " + e.LastError
		}
		return []string{e.JobID, expectState(e), formatTime(e.DueAt), strconv.FormatInt(e.Polls, 10),
			strconv.FormatInt(e.Redeliveries, 10), dash(e.JobStatus), dash(reason)}
	})
}

// errNoJobs is expect without a job id.
var errNoJobs = errors.New("expect needs at least one job id: inbox expect JOB_ID...")
