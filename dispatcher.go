package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"inbox/admin"
	"inbox/dispatch"
	"inbox/inbox"
	"inbox/nats"
	"inbox/receiver"
	"inbox/reconcile"
)

// connectTimeout bounds finding the NATS stream at start.
const connectTimeout = 10 * time.Second

// destinationHelp is the part of serve's and dispatch's help about handing
// rows on.
const destinationHelp = `Each new row is handed to exactly one destination, at least once:
   --forward-url    POSTs the stored body with Idempotency-Key: <job id>,
                    Inbox-Event and Inbox-Attempt, signed in the Standard
                    Webhooks format (webhook-id: <job id>, webhook-timestamp,
                    webhook-signature: v1,<base64>) when --forward-secret is set.
                    2xx is success; any other 4xx than 408 and 429 parks the row
                    handler_rejected at once; the rest is retried.
   --exec           runs the command with /bin/sh -c, the body on stdin and
                    INBOX_JOB_ID, INBOX_EVENT, INBOX_ATTEMPT in its environment
                    (not the INBOX_* and SUME_* variables of this process).
                    Exit 0 is success; exit 65 (EX_DATAERR) parks the row
                    handler_rejected at once; any other exit, a signal or the
                    --timeout (which kills its whole process group) is retried.
   --nats-url and --nats-subject
                    publish to JetStream with Nats-Msg-Id: <job id> and wait
                    for the stream's ack; a stream must cover the subject.
A failure is retried after each wait of --retry-schedule, then the row is
parked handler_failed with the last error. Parked rows come back only
through inbox reprocess. The application must key its own writes on the job
id: a row can be delivered more than once.`

// dispatchFlags are the flags that choose and tune the destination. They
// are built per command: a flag value is filled in from the environment
// when applied.
func dispatchFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "forward-url", Usage: "POST each new row to this URL", EnvVars: []string{"INBOX_FORWARD_URL"}},
		&cli.StringFlag{Name: "forward-secret", Usage: "sign forwarded rows with this Standard Webhooks secret (whsec_<base64>, or raw); prefer the environment variable", EnvVars: []string{"INBOX_FORWARD_SECRET"}},
		&cli.StringFlag{Name: "exec", Usage: "run this shell command for each new row, the body on stdin; exit 65 means never retry", EnvVars: []string{"INBOX_EXEC"}},
		&cli.StringFlag{Name: "nats-url", Usage: "publish each new row to NATS JetStream at this URL", EnvVars: []string{"INBOX_NATS_URL"}},
		&cli.StringFlag{Name: "nats-subject", Usage: "the subject to publish to; a JetStream stream must cover it", EnvVars: []string{"INBOX_NATS_SUBJECT"}},
		&cli.IntFlag{Name: "workers", Value: dispatch.DefaultWorkers, Usage: "how many deliveries run at once", EnvVars: []string{"INBOX_WORKERS"}},
		&cli.StringFlag{Name: "retry-schedule", Value: "1s,5s,30s,5m", Usage: "the wait before each retry; then the row is parked handler_failed (none: no retries)", EnvVars: []string{"INBOX_RETRY_SCHEDULE"}},
		&cli.DurationFlag{Name: "timeout", Value: dispatch.DefaultTimeout, Usage: "how long one delivery attempt may take", EnvVars: []string{"INBOX_TIMEOUT"}},
		&cli.DurationFlag{Name: "lease", Value: dispatch.DefaultLease, Usage: "how long a claim holds; a row whose dispatcher died is delivered again after it (at least twice --timeout)", EnvVars: []string{"INBOX_LEASE"}},
	}
}

// destinationSet reports whether any destination flag is set.
func destinationSet(c *cli.Context) bool {
	for _, name := range []string{"forward-url", "exec", "nats-url", "nats-subject", "forward-secret"} {
		if c.String(name) != "" {
			return true
		}
	}
	return false
}

// newDispatcher builds the dispatcher the flags describe, on store. The
// returned close releases the destination once the dispatcher has run. It
// fails when not exactly one destination is set, a flag is out of range, or
// the destination cannot be reached (no stream covers the NATS subject).
func newDispatcher(c *cli.Context, store dispatch.Store, log zerolog.Logger, reg prometheus.Registerer) (*dispatch.Dispatcher, func(), error) {
	var chosen []string
	for _, name := range []string{"forward-url", "exec", "nats-url"} {
		if c.String(name) != "" {
			chosen = append(chosen, "--"+name)
		}
	}
	switch {
	case len(chosen) == 0:
		return nil, nil, errors.New("no destination: set one of --forward-url, --exec or --nats-url")
	case len(chosen) > 1:
		return nil, nil, fmt.Errorf("one destination only, got %s", strings.Join(chosen, " and "))
	case c.String("forward-secret") != "" && c.String("forward-url") == "":
		return nil, nil, errors.New("--forward-secret needs --forward-url")
	case (c.String("nats-url") == "") != (c.String("nats-subject") == ""):
		return nil, nil, errors.New("--nats-url and --nats-subject go together")
	}
	schedule, err := dispatch.ParseSchedule(c.String("retry-schedule"))
	if err != nil {
		return nil, nil, fmt.Errorf("--retry-schedule: %w", err)
	}

	var dest dispatch.Destination
	closeDest := func() {}
	switch {
	case c.String("forward-url") != "":
		dest, err = dispatch.NewForward(c.String("forward-url"), c.String("forward-secret"), nil)
	case c.String("exec") != "":
		dest, err = dispatch.NewExec(c.String("exec"))
	default:
		ctx, cancel := context.WithTimeout(c.Context, connectTimeout)
		defer cancel()
		var p *nats.Publisher
		if p, err = nats.Connect(ctx, c.String("nats-url"), c.String("nats-subject")); err == nil {
			dest, closeDest = p, p.Close
			log.Info().Str("stream", p.Stream()).Str("subject", c.String("nats-subject")).Msg("publishing to JetStream")
		}
	}
	if err != nil {
		return nil, nil, err
	}
	d, err := dispatch.New(store, dispatch.Config{
		Destination: dest,
		Workers:     c.Int("workers"),
		Schedule:    schedule,
		Timeout:     c.Duration("timeout"),
		Lease:       c.Duration("lease"),
		Registerer:  reg,
	}, log)
	if err != nil {
		closeDest()
		return nil, nil, err
	}
	return d, closeDest, nil
}

func dispatchCommand(logOut io.Writer) *cli.Command {
	return &cli.Command{
		Name:  "dispatch",
		Usage: "hand new rows to the application, without receiving",
		Description: `Runs the dispatcher on its own against the database serve writes, so it can
be stopped, upgraded and restarted without touching the receiver (run serve
without a destination then). Several may run at once: each claims rows on a
lease (--lease), so a row is held by one at a time, and a row whose
dispatcher died is delivered again when its lease runs out. SIGTERM stops
claiming, lets the attempts under way finish, gives back the rows not yet
started, and exits 0. With --admin-addr it answers /healthz, /readyz and
/metrics there (its inbox_dispatch_* counters; the queue's gauges are
serve's).

` + destinationHelp + `

` + reconcileHelp + `

Examples:
   inbox dispatch --forward-url http://127.0.0.1:3000/jobs
   inbox dispatch --admin-addr 127.0.0.1:8082 --forward-url http://127.0.0.1:3000/jobs
   INBOX_FORWARD_SECRET=whsec_<base64 key> inbox dispatch --forward-url https://app.internal/jobs
   inbox dispatch --exec './handle-job.sh' --workers 8 --timeout 2m --lease 5m
   inbox dispatch --nats-url nats://127.0.0.1:4222 --nats-subject sume.jobs.terminal
   inbox dispatch --exec 'python3 handle.py' --retry-schedule 10s,1m,10m,1h
   SUME_API_KEY=... inbox dispatch --forward-url http://127.0.0.1:3000/jobs --api-url https://api.sume.com --poll-backoff 5m --api-concurrency 4`,
		Flags: append([]cli.Flag{
			admin.DBFlag(),
			&cli.StringFlag{Name: "admin-addr", Usage: "listen address for /healthz, /readyz and /metrics (the inbox_dispatch_* counters); empty: none", EnvVars: []string{"INBOX_DISPATCH_ADMIN_ADDR"}},
			&cli.DurationFlag{Name: "busy-timeout", Value: inbox.DefaultBusyTimeout, Usage: "how long a write waits for serve's lock", EnvVars: []string{"INBOX_BUSY_TIMEOUT"}},
			logLevelFlag(),
		}, append(dispatchFlags(), reconcileFlags()...)...),
		Action: func(c *cli.Context) error {
			if err := admin.NoArgs(c); err != nil {
				return err
			}
			log, err := newLogger(logOut, c.String("log-level"))
			if err != nil {
				return err
			}
			var aln net.Listener
			if addr := c.String("admin-addr"); addr != "" {
				if aln, err = net.Listen("tcp", addr); err != nil {
					return fmt.Errorf("--admin-addr: %w", err)
				}
				defer aln.Close()
			}
			store, err := inbox.Open(c.Context, c.String("db"), inbox.Options{
				Schema:      schema,
				MustExist:   true,
				BusyTimeout: c.Duration("busy-timeout"),
			})
			if err != nil {
				return err
			}
			defer store.Close()
			reg := newRegistry()
			d, closeDest, err := newDispatcher(c, store, log, reg)
			if err != nil {
				return err
			}
			defer closeDest()
			rec, err := newReconciler(c, store, nil, log, reg)
			if err != nil {
				return err
			}
			log.Info().Str("db", store.Path()).Msg("starting")
			if err := runWithOps(c, d, rec, aln, store, reg, log); err != nil {
				return err
			}
			closeDest()
			return store.Close()
		},
	}
}

// runWithOps runs d and rec until c's context is done and, when aln is not
// nil, answers the probes, /metrics and POST /expect on it meanwhile. If
// that endpoint fails, the dispatcher is stopped too.
func runWithOps(c *cli.Context, d *dispatch.Dispatcher, rec *reconcile.Reconciler, aln net.Listener, store *inbox.Store, reg *prometheus.Registry, log zerolog.Logger) error {
	ctx, cancel := context.WithCancel(c.Context)
	defer cancel()
	reconciled := make(chan error, 1)
	go func() { reconciled <- rec.Run(ctx) }()
	if aln == nil {
		err := d.Run(ctx)
		cancel()
		return errors.Join(err, <-reconciled)
	}
	ops := http.NewServeMux()
	handleOps(ops, store, reg, log)
	handleExpect(c, ops, store, log)
	dispatched := make(chan error, 1)
	go func() {
		dispatched <- d.Run(ctx)
		cancel() // the dispatcher is done: stop answering probes
	}()
	served := receiver.Serve(ctx, receiver.DefaultLimits(), log, receiver.Endpoint{Name: "admin", Listener: aln, Handler: ops})
	cancel()
	return errors.Join(<-dispatched, <-reconciled, served)
}
