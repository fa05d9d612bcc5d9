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
		Name:        "dispatch",
		Usage:       "hand new rows to the application, without receiving",
		Description: help("dispatch"),
		HideHelp:    true,
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
			if err := config.Work(c.Context); err != nil {
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
	if err := process.CheckDestinations(cfg.Destinations); err != nil {
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
