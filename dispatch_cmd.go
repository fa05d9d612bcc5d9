package main

import (
	"io"
	"slices"

	"github.com/urfave/cli/v2"

	"inbox/config"
	"inbox/dispatch"
	"inbox/process"
	"inbox/stores"
)

// destinationHelp is the part of serve's and dispatch's help about handing
// rows on.
const destinationHelp = `Each new row is handed to every destination whose filters take it, at least
once each, with its source (sume, vibe, ...), the provider's own key (Sume's
job_id, Vibe's runId, GitHub's delivery id, ...) and the row id
(<source>/<key>, or the bare key for sume: what inbox show takes). The flags
below configure one destination, named default, that takes every row; the
[[destination]] tables of --config configure any number (not both):
   [[destination]]
   name = "billing"                 # a-z, 0-9, - and _; inbox pause takes it
   url = "https://billing.internal/jobs"   # or exec = "...", or
                                    # nats_url = "..." with nats_subject = "...", or
                                    # amqp_url = "amqp://..." with amqp_exchange
                                    # and amqp_routing_key (RabbitMQ)
   secret_env = "BILLING_SECRET"    # or secret = "whsec_..."; url only
   sources = ["sume"]               # only these sources' rows; empty: all
   events = ["job.completed"]       # only these events; empty: all
   workers = 8                      # and timeout, slow_after, max_slow,
   retry_schedule = "1s,5s"         # lease: the flags' meanings, snake_case;
   rate = "50/s"                    # at most this many attempts a second
                                    # (or "600/m"); unset: no bound
A knob a table leaves unset takes the flag's value (--workers, --timeout,
...). SIGHUP reads the tables again: a removed destination stops claiming
and finishes the attempts under way, a changed one is restarted with its
new settings once its old dispatcher has settled what it held, an added
one starts, and the rows matched from then on go by the new filters; a
file that fails a check of start-up is refused with one log line, and
nothing changes. inbox destinations --admin lists the destinations in
effect. Each destination has its own attempts, lease, schedule, last error
and outcome per row: one that fails or is paused parks or holds its rows for
itself alone and never holds the others back. A row is matched to the
destinations when a dispatcher first claims it (and again when inbox
reprocess or a new delivery revives it): a destination added later gets only
the rows matched after it was, and a revived row's parked destinations try
again while those that took it are left alone. A row no destination takes
is done. The row's own status sums up its destinations': new while any has
yet to take it, else parked while any parked it, else done; inbox show and
inbox stats say where it stands with each. Rows stored by a version before
destinations keep their state as destination default's. inbox pause NAME
stops a destination on every running dispatcher within about a second
(its rows wait, no attempt counted) until inbox resume NAME.
   --forward-url    POSTs the stored body with Idempotency-Key: <key>,
                    Inbox-Source, Inbox-Key, Inbox-Row-Id, Inbox-Event and
                    Inbox-Attempt, signed in the Standard Webhooks format
                    (webhook-id: <key>, webhook-timestamp, webhook-signature:
                    v1,<base64>) when --forward-secret is set. 2xx is success;
                    any other 4xx than 408 and 429 parks the row
                    handler_rejected at once; the rest is retried, but no
                    answer, 429 and 502-504 are the application's outage.
   --exec           runs the command with /bin/sh -c, the body on stdin and
                    INBOX_SOURCE, INBOX_KEY, INBOX_ROW_ID (and INBOX_JOB_ID,
                    the same), INBOX_EVENT, INBOX_ATTEMPT in its environment,
                    without this process's INBOX_* and SUME_* variables, the
                    variables --config's secrets are read from, and any
                    variable holding a configured secret or a password of
                    a postgres:// --db: its URL's, PGPASSWORD's or
                    PGSSLPASSWORD's (those two are withheld too).
                    Exit 0 is success; exit 65 (EX_DATAERR) parks the row
                    handler_rejected at once; any other exit, a signal or the
                    --timeout (which kills its whole process group) is retried;
                    exit 69 (EX_UNAVAILABLE), 75 (EX_TEMPFAIL) and the
                    --timeout are the destination's outage.
   --nats-url and --nats-subject
                    publish to JetStream with Nats-Msg-Id: <row id>,
                    Idempotency-Key: <key> and the Inbox-* headers above, and
                    wait for the stream's ack; a stream must cover the subject.
                    A broker that is down never stops the start: it is
                    connected in the background. While it is unreachable
                    or its stream does not answer, dispatch pauses: no row
                    is claimed or attempted, none uses up its retries, and
                    it resumes within about a second of the broker's
                    return; /readyz, inbox_nats_connected and
                    inbox_dispatch_paused say how it stands. A message above
                    the server's max_payload (1 MiB by default: the default
                    --max-body) can never be published: its row is parked
                    too_large_for_destination at once, and the start warns.
An attempt is counted before it is sent (Inbox-Attempt, from 1), the next
rows' counts written while the current ones are sent; a count never sent is
undone, but a dispatcher killed costs at most 16 x --workers rows of each
destination one attempt each (4 x when the destination kept the workers
busy all along). One running past --slow-after goes on beside the workers
(at most --max-slow at once), so rows that hang at the destination do not
hold the workers for --timeout.
A failure is retried after each wait of --retry-schedule, then the row is
parked handler_failed with the last error. An outage of the destination
(those above, a timeout, or the same failure for 3 rows in a row) uses up
no retry: its rows wait uncounted while one at a time probes it, at most
a minute apart (or its Retry-After), and all go on once one succeeds;
inbox stats, /readyz and inbox alert --down-for show it (docs/dispatch.md).
Parked rows come back only through inbox reprocess. A row can be delivered
more than once: key the application's writes and external effects on the
source and the key.`

// dispatchFlags are the flags that choose and tune the destination. They
// are built per command: a flag value is filled in from the environment
// when applied.
func dispatchFlags() []cli.Flag {
	return append(inCategory(catDestinations,
		&cli.StringFlag{Name: "forward-url", Usage: "POST each new row to this URL", EnvVars: []string{"INBOX_FORWARD_URL"}},
		&cli.StringFlag{Name: "forward-secret", Usage: "sign forwarded rows with this Standard Webhooks secret, whsec_<base64 of the key> (inbox secret makes one); prefer the environment variable", EnvVars: []string{"INBOX_FORWARD_SECRET"}},
		&cli.StringFlag{Name: "exec", Usage: "run this shell command for each new row, the body on stdin; exit 65 means never retry", EnvVars: []string{"INBOX_EXEC"}},
		&cli.StringFlag{Name: "nats-url", Usage: "publish each new row to NATS JetStream at this URL", EnvVars: []string{"INBOX_NATS_URL"}},
		&cli.StringFlag{Name: "nats-subject", Usage: "the subject to publish to; a JetStream stream must cover it", EnvVars: []string{"INBOX_NATS_SUBJECT"}},
	), inCategory(catDispatch,
		&cli.IntFlag{Name: "workers", Value: dispatch.DefaultWorkers, Usage: "how many deliveries run at once, besides those past --slow-after", EnvVars: []string{"INBOX_WORKERS"}},
		&cli.StringFlag{Name: "retry-schedule", Value: "1s,5s,30s,5m", Usage: "the wait before each retry; then the row is parked handler_failed (none: no retries)", EnvVars: []string{"INBOX_RETRY_SCHEDULE"}},
		config.DurationFlag("timeout", dispatch.DefaultTimeout, "how long one delivery attempt may take", "INBOX_TIMEOUT", config.NotNegative),
		slowAfterFlag(),
		&cli.IntFlag{Name: "max-slow", Value: dispatch.DefaultMaxSlow, Usage: "at most this many slow attempts run beside the workers (0: none; an attempt then holds its worker until it ends)", EnvVars: []string{"INBOX_MAX_SLOW"}},
		config.DurationFlag("lease", dispatch.DefaultLease, "how long a claim holds; a row whose dispatcher died is delivered again after it (at least twice --timeout)", "INBOX_LEASE", config.NotNegative),
	)...)
}

// slowAfterFlag is --slow-after, whose zero fits it to the destination.
func slowAfterFlag() *cli.GenericFlag {
	f := config.DurationFlag("slow-after", 0, "an attempt running longer goes on beside the workers, which take the next rows; 0 fits it to the destination: 1s at first, then 4 times its usual answer time, at least 250ms (never more than --timeout/20 at first, --timeout/4 after)", "INBOX_SLOW_AFTER", config.NotNegative)
	f.DefaultText = "0: fit the destination"
	return f
}

// defaultMaxBody is --max-body's default, what inbox dispatch assumes the
// sources hand on.
const defaultMaxBody = 1 << 20

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
started, and exits 0. SIGHUP reads --config's [[destination]] tables
again (see below). With --admin-addr it answers /healthz, /readyz,
/metrics (its inbox_dispatch_* counters; the queue's gauges are serve's)
and GET /destinations (what inbox destinations --admin prints) there; /readyz fails while its claims and settlements fail to commit,
and its probe claims a row of its own, undone, so it recovers idle; it
says a line per destination: "destination NAME: dispatching", "paused by
an operator" or "unreachable: paused". The inbox_dispatch_* metrics carry
a destination label. While it works it logs at info, at most every 10 s,
per destination, a line "dispatch progress" with its destination (its
name), kind (forward, exec, nats, redis, bullmq or amqp) and the rows handed_on, retried and
parked since the last one, and the rows it holds; nothing while idle
(serve with a destination does the same).
On PostgreSQL it waits for a database that cannot be reached at start, as
serve does: /readyz fails and no row is claimed until it answers; what the
server refuses stops it at once.

` + destinationHelp + `

` + reconcileHelp + `

Examples:
   inbox dispatch --forward-url http://127.0.0.1:3000/jobs
   inbox dispatch --admin-addr 127.0.0.1:8082 --forward-url http://127.0.0.1:3000/jobs
   INBOX_FORWARD_SECRET=whsec_<base64 key> inbox dispatch --forward-url https://app.internal/jobs
   inbox dispatch --exec './handle-job.sh' --workers 8 --timeout 2m --lease 5m
   inbox dispatch --nats-url nats://127.0.0.1:4222 --nats-subject sume.jobs.terminal
   inbox dispatch --exec 'python3 handle.py' --retry-schedule 10s,1m,10m,1h
   inbox dispatch --config /etc/inbox/inbox.toml --exec /usr/local/bin/handle-job
   inbox dispatch --config /etc/inbox/inbox.toml     # its [[destination]] tables
   inbox dispatch --forward-url http://127.0.0.1:3000/jobs --slow-after 2s --max-slow 32
   SUME_API_KEY=... inbox dispatch --forward-url http://127.0.0.1:3000/jobs --api-url https://api.sume.com --poll-backoff 5m --api-concurrency 4`,
		HideHelp: true,
		Flags: slices.Concat(inCategory(catStore, append([]cli.Flag{
			config.DBFlag(),
			config.BusyTimeoutFlag("how long a write waits for serve's lock (500ms, 3s, 1m)"),
		}, dbWriteFlags()...)...), inCategory(catDestinations,
			config.FileFlag("serve's TOML file of [[source]] and [[destination]] tables: the destinations to hand rows to (instead of --forward-url, --exec or --nats-url); with an exec destination, the variables its secrets are read from are kept from the command"),
		), inCategory(catListening,
			&cli.StringFlag{Name: "admin-addr", Usage: "listen address for /healthz, /readyz, /metrics (the inbox_dispatch_* counters) and GET /destinations; empty: none", EnvVars: []string{"INBOX_DISPATCH_ADMIN_ADDR"}},
		), dispatchFlags(), reconcileFlags(), inCategory(catLogging, logLevelFlag(), helpFlag())),
		Action: func(c *cli.Context) error {
			cfg, err := parseDispatch(c, logOut)
			if err != nil {
				return err
			}
			if err := work(c.Context); err != nil {
				return err
			}
			return runError(c.String("db"), process.Run(c.Context, cfg))
		},
	}
}

// parseDispatch reads dispatch's flags into the run's Config, its logger
// writing to logOut; it opens nothing and binds nothing.
func parseDispatch(c *cli.Context, logOut io.Writer) (process.Config, error) {
	if err := config.NoArgs(c); err != nil {
		return process.Config{}, err
	}
	log, err := newLogger(logOut, c.String("log-level"))
	if err != nil {
		return process.Config{}, err
	}
	db := c.String("db")
	logErrorsWithoutAddress(db)
	cfg := process.Config{Log: log, DB: stores.Describe(db), File: c.String("config"), AdminAddr: c.String("admin-addr"), MaxBody: defaultMaxBody,
		ReadDestinations: func() ([]config.Destination, error) { return config.Destinations(c) }}
	if cfg.Destinations, err = cfg.ReadDestinations(); err != nil {
		return process.Config{}, err
	}
	if cfg.Reconcile, err = parseReconcile(c); err != nil {
		return process.Config{}, err
	}
	pg, err := parsePGOptions(c, db)
	if err != nil {
		return process.Config{}, err
	}
	cfg.Open = storeOpener(db, stores.Options{Schema: schema, MustExist: true, BusyTimeout: config.DurationOf(c, "busy-timeout").Get(), Wait: true, PG: pg})
	return cfg, nil
}
