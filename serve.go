package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/config"
	"inbox/deploy"
	"inbox/inbox"
	"inbox/process"
	"inbox/receiver"
	"inbox/replica"
	"inbox/scheme"
	"inbox/stores"
)

// defaultBodyTimeout is --body-timeout's default: a real delivery's few KiB
// arrive with the headers, so a body still missing after this stalled.
const defaultBodyTimeout = 2 * time.Second

func serveCommand(logOut io.Writer) *cli.Command {
	def := receiver.DefaultLimits()
	return &cli.Command{
		Name:        "serve",
		Usage:       "receive webhooks",
		Description: help("serve"),
		HideHelp:    true,
		Flags: slices.Concat(inCategory(catListening,
			&cli.StringFlag{Name: "addr", Value: "127.0.0.1:8080", Usage: "listen address", EnvVars: []string{"INBOX_ADDR"}},
			&cli.StringFlag{Name: "admin-addr", Usage: "listen address for /healthz, /readyz, /metrics and the read-only web console at /; empty: serve the probes on --addr, and no console", EnvVars: []string{"INBOX_ADMIN_ADDR"}},
		), inCategory(catSources,
			config.FileFlag("TOML file of [[source]] tables to serve, each at its own path, and [[destination]] tables to hand rows to; without it serve is the one Sume source --secret, --path, --tolerance, --event, --max-body and --max-request describe"),
			&cli.StringSliceFlag{Name: "secret", Usage: "signing secret; repeat or comma-separate to accept several during a rotation (prefer the environment variable: flags show in ps)", EnvVars: []string{"SUME_COM_WEBHOOK_SIGNING_SECRET"}},
			config.DurationFlag("tolerance", config.DefaultTolerance, "how far the signed timestamp may be from now, either way", "INBOX_TOLERANCE", config.Positive),
			config.EventsFlag(),
			config.MaxBodyFlag(),
			&cli.StringFlag{Name: "max-request", Value: "4MiB", Usage: "hard cap: larger requests get 413 and are not read", EnvVars: []string{"INBOX_MAX_REQUEST"}},
			&cli.StringFlag{Name: "path", Value: "/webhooks/sume", Usage: "the webhook path", EnvVars: []string{"INBOX_PATH"}},
		), inCategory(catStore, append([]cli.Flag{
			config.DBFlag(),
			config.BusyTimeoutFlag("how long a delivery waits for another process's lock before the answer is 503; at most --read-timeout, so the 503 is written before the write deadline"),
		}, append(dbWriteFlags(), config.ReplicaFlags()...)...)...), inCategory(catLimits,
			&cli.IntFlag{Name: "max-in-flight", Value: 512, Usage: "webhook requests verified and stored at once, all sources together (a body still arriving takes no place); beyond it the answer is 503 with Retry-After", EnvVars: []string{"INBOX_MAX_IN_FLIGHT"}},
			&cli.StringFlag{Name: "max-body-memory", Value: "64MiB", Usage: "webhook bodies held in memory at once, all sources together, each taking its bytes as they arrive (above 64 KiB a body may fill only three quarters); a body it cannot take gets 503 with Retry-After; at least twice the largest --max-request", EnvVars: []string{"INBOX_MAX_BODY_MEMORY"}},
			config.DurationFlag("read-header-timeout", def.ReadHeaderTimeout, "a client that has not sent its headers by then is disconnected", "INBOX_READ_HEADER_TIMEOUT", config.Positive),
			config.DurationFlag("read-timeout", def.ReadTimeout, "a request not wholly read by then, body included, is given up; answers are written within a second more", "INBOX_READ_TIMEOUT", config.Positive),
			config.DurationFlag("body-timeout", defaultBodyTimeout, "a body not in this long after its headers, plus a second per 64 KiB received, is given up (408) and holds no place in --max-in-flight meanwhile", "INBOX_BODY_TIMEOUT", config.Positive),
		), dispatchFlags(), reconcileFlags(), inCategory(catLogging, logLevelFlag(), helpFlag())),
		Action: func(c *cli.Context) error {
			cfg, err := parseServe(c, logOut)
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

// parseServe reads serve's flags into the run's Config, its logger
// writing to logOut. It fails, naming the flag, on any value serve cannot
// run with; it opens nothing and binds nothing.
func parseServe(c *cli.Context, logOut io.Writer) (process.Config, error) {
	if err := config.NoArgs(c); err != nil {
		return process.Config{}, err
	}
	db := c.String("db")
	cfg := process.Config{DB: stores.Describe(db), File: c.String("config"), Addr: c.String("addr"), AdminAddr: c.String("admin-addr"),
		BodyTimeout: config.DurationOf(c, "body-timeout").Get(), MaxInFlight: c.Int("max-in-flight")}
	busyTimeout := config.DurationOf(c, "busy-timeout").Get()
	log, err := newLogger(logOut, c.String("log-level"))
	if err != nil {
		return process.Config{}, err
	}
	logErrorsWithoutAddress(db)
	cfg.Log = log
	pg, err := parsePGOptions(c, db)
	if err != nil {
		return process.Config{}, err
	}
	rep, err := parseReplica(c, db, log)
	if err != nil {
		return process.Config{}, err
	}
	o := stores.Options{Schema: schema, BusyTimeout: busyTimeout, Wait: true, PG: pg}
	cfg.Open = storeOpener(db, o)
	if rep.URL != "" {
		rep.Config.WaitTimeout = busyTimeout
		o.Replica = &rep.Config
		open := storeOpener(db, o)
		cfg.Open = func(ctx context.Context, obs process.StoreObservers) (inbox.Store, error) {
			if err := replica.RestoreIfMissing(ctx, rep.Config, db, rep.RestoreIfMissing, checkRestored); err != nil {
				return nil, err
			}
			return open(ctx, obs)
		}
	}
	rules, err := config.Rules(c)
	if err != nil {
		return process.Config{}, err
	}
	maxRequest, err := config.ParseSize(c.String("max-request"))
	if err != nil {
		return process.Config{}, fmt.Errorf("--max-request: %w", err)
	}
	if cfg.Sources, err = serveSources(c, rules, maxRequest); err != nil {
		return process.Config{}, err
	}
	lim := receiver.DefaultLimits()
	header, read := config.DurationOf(c, "read-header-timeout"), config.DurationOf(c, "read-timeout")
	lim.ReadHeaderTimeout, lim.ReadTimeout = header.Get(), read.Get()
	lim.WriteTimeout = lim.ReadTimeout + time.Second
	if lim.ReadTimeout < lim.ReadHeaderTimeout {
		return process.Config{}, fmt.Errorf("--read-header-timeout %q and --read-timeout %q: want 0 < header timeout <= read timeout", header, read)
	}
	cfg.Limits = lim
	if cfg.BodyTimeout > lim.ReadTimeout {
		return process.Config{}, config.DurationOf(c, "body-timeout").Errorf("want 0 < body timeout <= --read-timeout %q", read)
	}
	if cfg.MaxInFlight < 1 {
		return process.Config{}, fmt.Errorf("--max-in-flight must be at least 1, got %d", cfg.MaxInFlight)
	}
	if most := lim.WriteTimeout - answerMargin; busyTimeout > most {
		// A delivery's 503 could not be written before the write deadline:
		// the sender would see a reset connection rather than a Retry-After.
		return process.Config{}, config.DurationOf(c, "busy-timeout").Errorf("a delivery that waits that long for the lock gets its 503 after the %s write deadline (--read-timeout + 1s); want at most %s, or a longer --read-timeout", lim.WriteTimeout, most)
	}
	if cfg.BodyMemory, err = config.ParseSize(c.String("max-body-memory")); err != nil {
		return process.Config{}, fmt.Errorf("--max-body-memory: %w", err)
	}
	cfg.BodyMemoryText = c.String("max-body-memory")
	if err := cfg.CheckSources(cfg.Sources); err != nil {
		return process.Config{}, err
	}
	if cfg.Reconcile, err = parseReconcile(c); err != nil {
		return process.Config{}, err
	}
	cfg.MaxBody = largestBody(cfg.Sources)
	cfg.ReadDestinations = func() ([]config.Destination, error) {
		d, err := config.Destinations(c)
		if errors.Is(err, config.ErrNoDestination) {
			return nil, nil // serve only receives
		}
		return d, err
	}
	if cfg.Destinations, err = cfg.ReadDestinations(); err != nil {
		return process.Config{}, err
	}
	return cfg, nil
}

// answerMargin is what a 503 needs after the busy timeout to reach the
// sender before the write deadline: the answer itself, and the reading of
// a body that took its time.
const answerMargin = time.Second

// serveSources returns the sources of --config, or without it the one Sume
// source the flags describe, as serve has always served it.
func serveSources(c *cli.Context, rules inbox.Rules, maxRequest int64) ([]config.Source, error) {
	if file := c.String("config"); file != "" {
		if err := config.Excludes(c, "secret", "path", "tolerance", "event", "max-body", "max-request"); err != nil {
			return nil, err
		}
		return process.ReadSources(file)
	}
	secrets, err := config.SplitList(c.StringSlice("secret"))
	if err != nil {
		return nil, fmt.Errorf("signing secret: %w", err)
	}
	if len(secrets) == 0 {
		return nil, errors.New("no signing secret: set SUME_COM_WEBHOOK_SIGNING_SECRET (or --secret), or give --config")
	}
	if slices.ContainsFunc(secrets, deploy.Placeholder) {
		return nil, errors.New("SUME_COM_WEBHOOK_SIGNING_SECRET (or --secret) holds the placeholder of the shipped inbox.env: set it to the signing secret from Sume's dashboard")
	}
	keys := make([]scheme.Secret, len(secrets))
	entries := make([]config.SecretEntry, len(secrets))
	for i, s := range secrets {
		keys[i] = scheme.Secret{Key: []byte(s)}
		entries[i] = config.SecretEntry{Env: "SUME_COM_WEBHOOK_SIGNING_SECRET", Key: keys[i].Key}
	}
	return []config.Source{{Name: inbox.DefaultSource, Path: c.String("path"), Scheme: scheme.Sume{Tolerance: config.DurationOf(c, "tolerance").Get()},
		Keys: keys, Rules: rules, HardCap: maxRequest, Accepted: http.StatusNoContent, Secrets: entries}}, nil
}

// largestBody is the largest body sources hand on: their max_body (or
// --max-body), or, with none, their request cap.
func largestBody(sources []config.Source) int64 {
	var most int64
	for _, src := range sources {
		b := src.Rules.MaxBody
		if b <= 0 {
			b = src.HardCap
		}
		most = max(most, b)
	}
	return most
}
