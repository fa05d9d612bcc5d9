package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"inbox/config"
	"inbox/deploy"
	"inbox/dispatch"
	"inbox/health"
	"inbox/inbox"
	"inbox/nats"
	"inbox/receiver"
	"inbox/reconcile"
	"inbox/scheme"
)

// connectTimeout bounds looking up the NATS stream at start.
const connectTimeout = 10 * time.Second

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
                                    # nats_url = "..." with nats_subject = "..."
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
	return []cli.Flag{
		&cli.StringFlag{Name: "forward-url", Usage: "POST each new row to this URL", EnvVars: []string{"INBOX_FORWARD_URL"}},
		&cli.StringFlag{Name: "forward-secret", Usage: "sign forwarded rows with this Standard Webhooks secret, whsec_<base64 of the key> (inbox secret makes one); prefer the environment variable", EnvVars: []string{"INBOX_FORWARD_SECRET"}},
		&cli.StringFlag{Name: "exec", Usage: "run this shell command for each new row, the body on stdin; exit 65 means never retry", EnvVars: []string{"INBOX_EXEC"}},
		&cli.StringFlag{Name: "nats-url", Usage: "publish each new row to NATS JetStream at this URL", EnvVars: []string{"INBOX_NATS_URL"}},
		&cli.StringFlag{Name: "nats-subject", Usage: "the subject to publish to; a JetStream stream must cover it", EnvVars: []string{"INBOX_NATS_SUBJECT"}},
		&cli.IntFlag{Name: "workers", Value: dispatch.DefaultWorkers, Usage: "how many deliveries run at once, besides those past --slow-after", EnvVars: []string{"INBOX_WORKERS"}},
		&cli.StringFlag{Name: "retry-schedule", Value: "1s,5s,30s,5m", Usage: "the wait before each retry; then the row is parked handler_failed (none: no retries)", EnvVars: []string{"INBOX_RETRY_SCHEDULE"}},
		config.DurationFlag("timeout", dispatch.DefaultTimeout, "how long one delivery attempt may take", "INBOX_TIMEOUT", config.NotNegative),
		slowAfterFlag(),
		&cli.IntFlag{Name: "max-slow", Value: dispatch.DefaultMaxSlow, Usage: "at most this many slow attempts run beside the workers (0: none; an attempt then holds its worker until it ends)", EnvVars: []string{"INBOX_MAX_SLOW"}},
		config.DurationFlag("lease", dispatch.DefaultLease, "how long a claim holds; a row whose dispatcher died is delivered again after it (at least twice --timeout)", "INBOX_LEASE", config.NotNegative),
	}
}

// slowAfterFlag is --slow-after, whose zero fits it to the destination.
func slowAfterFlag() *cli.GenericFlag {
	f := config.DurationFlag("slow-after", 0, "an attempt running longer goes on beside the workers, which take the next rows; 0 fits it to the destination: 1s at first, then 4 times its usual answer time, at least 250ms (never more than --timeout/20 at first, --timeout/4 after)", "INBOX_SLOW_AFTER", config.NotNegative)
	f.DefaultText = "0: fit the destination"
	return f
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

// dispatchConfig is what the destination flags, or one [[destination]]
// of --config, say, checked.
type dispatchConfig struct {
	route                     inbox.Route   // its name and filters
	routes                    []inbox.Route // every destination's
	forwardURL, forwardSecret string
	exec                      string
	withheld                  dispatch.Withheld // with exec
	natsURL, natsSubject      string
	workers                   int
	schedule                  []time.Duration
	timeout, slowAfter, lease time.Duration
	maxSlow                   int // -1: none
	rate                      float64
	// maxBody is the largest body the sources hand on (serve's --max-body
	// and max_body; for inbox dispatch, --max-body's default), which a
	// NATS destination checks against its server's max_payload at start.
	maxBody int64
}

// defaultMaxBody is --max-body's default, what inbox dispatch assumes the
// sources hand on.
const defaultMaxBody = 1 << 20

// headerRoom is what a NATS message's headers take beside its body, at
// most for a usual row: the warning at start allows for it.
const headerRoom = 1 << 10

// kind names the kind of destination cfg sets, for the dispatcher's log.
func (cfg dispatchConfig) kind() string {
	switch {
	case cfg.forwardURL != "":
		return "forward"
	case cfg.exec != "":
		return "exec"
	}
	return "nats"
}

// errNoDestination is parseDispatch's answer when neither the flags nor
// --config configure a destination.
var errNoDestination = errors.New("no destination: set one of --forward-url, --exec or --nats-url, or [[destination]] tables in --config")

// parseDispatch reads the destinations: the single-destination flags (one
// destination, named default) or the [[destination]] tables of --config,
// whose knobs left unset take the flags' values. It fails with
// errNoDestination when there is none, and when both are given, not
// exactly one destination flag is set, a setting is out of range, or
// --config cannot be read.
func parseDispatch(c *cli.Context) ([]dispatchConfig, error) {
	var tables []config.Destination
	if file := c.String("config"); file != "" {
		var err error
		if tables, err = config.LoadDestinations(file, os.Getenv); err != nil {
			return nil, err
		}
	}
	flags := destinationSet(c)
	switch {
	case flags && len(tables) > 0:
		return nil, fmt.Errorf("--config %s has [[destination]] tables, and --forward-url, --exec or --nats-url (with --forward-secret, --nats-subject) configure one more: use the tables or the flags, not both", c.String("config"))
	case !flags && len(tables) == 0:
		return nil, errNoDestination
	}
	base, err := parseKnobs(c)
	if err != nil {
		return nil, err
	}
	var cfgs []dispatchConfig
	if flags {
		cfg, err := parseFlagDestination(c, base)
		if err != nil {
			return nil, err
		}
		cfgs = append(cfgs, cfg)
	}
	for _, t := range tables {
		cfg, err := tableDestination(t, base)
		if err != nil {
			return nil, fmt.Errorf("--config %s: destination %s: %w", c.String("config"), t.Name, err)
		}
		cfgs = append(cfgs, cfg)
	}
	var routes []inbox.Route
	for _, cfg := range cfgs {
		routes = append(routes, cfg.route)
	}
	var w *dispatch.Withheld
	for i := range cfgs {
		cfgs[i].routes = routes
		if cfgs[i].exec == "" {
			continue
		}
		if w == nil {
			got, err := withheld(c, tables)
			if err != nil {
				return nil, err
			}
			w = &got
		}
		cfgs[i].withheld = *w
	}
	return cfgs, nil
}

// parseKnobs reads the flags that tune a destination.
func parseKnobs(c *cli.Context) (dispatchConfig, error) {
	cfg := dispatchConfig{workers: c.Int("workers"), timeout: config.DurationOf(c, "timeout").Get(), slowAfter: config.DurationOf(c, "slow-after").Get(),
		lease: config.DurationOf(c, "lease").Get(), maxSlow: c.Int("max-slow"), maxBody: defaultMaxBody}
	var err error
	if cfg.schedule, err = dispatch.ParseSchedule(c.String("retry-schedule")); err != nil {
		return dispatchConfig{}, fmt.Errorf("--retry-schedule: %w", err)
	}
	switch {
	case cfg.maxSlow < 0:
		return dispatchConfig{}, fmt.Errorf("--max-slow must be 0 or more, got %d", cfg.maxSlow)
	case cfg.maxSlow == 0:
		cfg.maxSlow = -1 // none: Config's zero is the default
	}
	return cfg, nil
}

// parseFlagDestination reads the single-destination flags into base: the
// destination named default, taking every row.
func parseFlagDestination(c *cli.Context, base dispatchConfig) (dispatchConfig, error) {
	var chosen []string
	for _, name := range []string{"forward-url", "exec", "nats-url"} {
		if c.String(name) != "" {
			chosen = append(chosen, "--"+name)
		}
	}
	switch {
	case len(chosen) == 0:
		return dispatchConfig{}, errors.New("no destination: set one of --forward-url, --exec or --nats-url")
	case len(chosen) > 1:
		return dispatchConfig{}, fmt.Errorf("one destination only, got %s", strings.Join(chosen, " and "))
	case c.String("forward-secret") != "" && c.String("forward-url") == "":
		return dispatchConfig{}, errors.New("--forward-secret needs --forward-url")
	case (c.String("nats-url") == "") != (c.String("nats-subject") == ""):
		return dispatchConfig{}, errors.New("--nats-url and --nats-subject go together")
	case deploy.Placeholder(c.String("forward-secret")):
		return dispatchConfig{}, errors.New("INBOX_FORWARD_SECRET (or --forward-secret) holds the placeholder of the shipped inbox.env: make a secret with inbox secret")
	}
	if _, err := scheme.StandardKey(c.String("forward-secret")); err != nil {
		return dispatchConfig{}, fmt.Errorf("INBOX_FORWARD_SECRET (or --forward-secret): %w: make one with inbox secret (a raw key K signs as whsec_ and the base64 of K)", err)
	}
	cfg := base
	cfg.route = inbox.Route{Name: inbox.DefaultDestination}
	cfg.forwardURL, cfg.forwardSecret = c.String("forward-url"), c.String("forward-secret")
	cfg.exec, cfg.natsURL, cfg.natsSubject = c.String("exec"), c.String("nats-url"), c.String("nats-subject")
	return cfg, nil
}

// tableDestination is t over base: its knobs where it sets them.
func tableDestination(t config.Destination, base dispatchConfig) (dispatchConfig, error) {
	cfg := base
	cfg.route = t.Route()
	cfg.forwardURL, cfg.forwardSecret = t.URL, t.Secret
	cfg.exec, cfg.natsURL, cfg.natsSubject = t.Exec, t.NATSURL, t.NATSSubject
	cfg.rate = t.Rate
	if t.Workers != 0 {
		cfg.workers = t.Workers
	}
	if t.Timeout != 0 {
		cfg.timeout = t.Timeout
	}
	if t.SlowAfter != 0 {
		cfg.slowAfter = t.SlowAfter
	}
	if t.Lease != 0 {
		cfg.lease = t.Lease
	}
	if t.MaxSlow != nil {
		switch {
		case *t.MaxSlow < 0:
			return dispatchConfig{}, fmt.Errorf("max_slow must be 0 or more, got %d", *t.MaxSlow)
		case *t.MaxSlow == 0:
			cfg.maxSlow = -1
		default:
			cfg.maxSlow = *t.MaxSlow
		}
	}
	if t.RetrySchedule != "" {
		var err error
		if cfg.schedule, err = dispatch.ParseSchedule(t.RetrySchedule); err != nil {
			return dispatchConfig{}, fmt.Errorf("retry_schedule: %w", err)
		}
	}
	return cfg, nil
}

// newDispatcher builds the dispatcher cfg describes, on store, routing by
// routing and held by held. The returned close releases the destination
// once the dispatcher has run; the dependencies are what /readyz shows of
// the destination (the NATS connection). A NATS server that cannot be
// reached never stops it: the connection is made in the background. alone
// is inbox dispatch, whose only work is the hand-off: the connection
// gates its readiness, and at start (first) a server that answers that no
// stream covers the subject stops it; inside serve that is only logged
// and shown, since webhooks never wait on it, and a destination a reload
// starts is not looked up at all (its readiness line says how it stands).
// It fails when a destination or the dispatcher refuses its settings.
func newDispatcher(ctx context.Context, cfg dispatchConfig, store dispatch.Store, routing *dispatch.Routing, held func() error, log zerolog.Logger, reg prometheus.Registerer, alone, first bool) (*dispatch.Dispatcher, func(), []health.Dependency, error) {
	var dest dispatch.Destination
	var deps []health.Dependency
	var err error
	closeDest := func() {}
	switch {
	case cfg.forwardURL != "":
		dest, err = dispatch.NewForward(cfg.forwardURL, cfg.forwardSecret, nil)
	case cfg.exec != "":
		dest, err = dispatch.NewExec(cfg.exec, cfg.withheld)
	default:
		var p *nats.Publisher
		if p, err = nats.Connect(cfg.natsURL, cfg.natsSubject, log); err != nil {
			break
		}
		name, preg := "nats", reg
		if cfg.route.Name != inbox.DefaultDestination {
			// Each named destination's gauge carries its name, as the
			// dispatch metrics do; the flags' one keeps its plain series.
			name += " " + cfg.route.Name
			preg = prometheus.WrapRegistererWith(prometheus.Labels{"destination": cfg.route.Name}, reg)
		}
		deps = append(deps, health.Dependency{Name: name, State: p.State, Gates: alone})
		gauge := p.Collector()
		if err = preg.Register(gauge); err != nil {
			p.Close()
			break
		}
		dest, closeDest = p, func() {
			preg.Unregister(gauge) // a restart of the destination registers its own
			p.Close()
		}
		if !first {
			break
		}
		cctx, cancel := context.WithTimeout(ctx, connectTimeout)
		defer cancel()
		switch cerr := p.Check(cctx); {
		case cerr == nil:
			log.Info().Str("stream", p.Stream()).Str("subject", cfg.natsSubject).Msg("publishing to JetStream")
			if most := p.MaxPayload(); most > 0 && cfg.maxBody+headerRoom > most {
				log.Warn().Int64("max_payload", most).Int64("max_body", cfg.maxBody).Str("subject", cfg.natsSubject).
					Msg("nats: the server's max_payload is below the largest body the sources take (--max-body, max_body) with its headers: a larger message can never be published, and its row is parked too_large_for_destination; raise max_payload on the server, or lower --max-body")
			}
			if most := p.MaxMsgSize(cctx); most > 0 && cfg.maxBody+headerRoom > most {
				log.Warn().Int64("max_msg_size", most).Int64("max_body", cfg.maxBody).Str("stream", p.Stream()).
					Msg("nats: the stream's max_msg_size is below the largest body the sources take (--max-body, max_body) with its headers: a larger message can never be stored, and its row is parked too_large_for_destination; raise the stream's max_msg_size, or lower --max-body")
			}
		case errors.Is(cerr, nats.ErrUnreachable):
			// Logged by Connect; the rows wait for the connection.
		case alone:
			err = cerr
		default:
			log.Error().Err(cerr).Msg("nats: webhooks are still taken; dispatch is paused, their rows wait with no attempt counted, until a stream answers")
		}
	}
	if err != nil {
		closeDest()
		return nil, nil, nil, err
	}
	dc := cfg.config(dest)
	dc.Registerer, dc.Routing, dc.Held = reg, routing, held
	d, err := dispatch.New(store, dc, log)
	if err != nil {
		closeDest()
		return nil, nil, nil, err
	}
	return d, closeDest, deps, nil
}

// config is the dispatcher's Config of cfg, handing rows to dest.
func (cfg dispatchConfig) config(dest dispatch.Destination) dispatch.Config {
	return dispatch.Config{
		Destination: dest,
		Workers:     cfg.workers,
		Schedule:    cfg.schedule,
		Timeout:     cfg.timeout,
		SlowAfter:   cfg.slowAfter,
		MaxSlow:     cfg.maxSlow,
		Lease:       cfg.lease,
		Name:        cfg.kind(),
		Route:       cfg.route,
		Routes:      cfg.routes,
		Rate:        cfg.rate,
	}
}

// check returns what newDispatcher would refuse of cfg, without making
// anything (no connection, no metrics).
func (cfg dispatchConfig) check() error {
	var err error
	switch {
	case cfg.forwardURL != "":
		_, err = dispatch.NewForward(cfg.forwardURL, cfg.forwardSecret, nil)
	case cfg.exec != "":
		_, err = dispatch.NewExec(cfg.exec, cfg.withheld)
	default:
		err = nats.CheckAddress(cfg.natsURL, cfg.natsSubject)
	}
	if err != nil {
		return err
	}
	return dispatch.Check(cfg.config(nil))
}

// settings names what cfg's dispatcher is made with, its filters aside
// (dispatch.Member.Settings): a digest, as it covers the secrets.
func (cfg dispatchConfig) settings() string {
	cfg.route = inbox.Route{Name: cfg.route.Name}
	cfg.routes = nil
	sum := sha256.Sum256(fmt.Appendf(nil, "%#v", cfg))
	return hex.EncodeToString(sum[:])
}

// withheld names the secrets an --exec command must not see: every
// variable a [[source.secret]] of --config names, and the values of every
// secret configured, from a flag or its variable alike: the sources', the
// Sume signing secrets (--secret, SUME_COM_WEBHOOK_SIGNING_SECRET), the
// Sume API key (--api-key, SUME_API_KEY), the forward secret, the user
// info of --api-url, --forward-url and --nats-url and, on PostgreSQL, the
// database's password and TLS key password, from the URL or the
// variables the driver reads them from (PGPASSWORD, PGSSLPASSWORD), and
// any variable that holds a copy of one. The config is read
// as inbox sources reads it, so a secret unset here is no error. It fails
// when --config cannot be read.
func withheld(c *cli.Context, dests []config.Destination) (dispatch.Withheld, error) {
	var w dispatch.Withheld
	add := func(vals ...string) {
		for _, v := range vals {
			if v = strings.TrimSpace(v); v != "" {
				w.Secrets = append(w.Secrets, v)
			}
		}
	}
	// Each secret as the flag holds it (from the command line or its
	// variable) and as the variable holds it: a flag given on the command
	// line still leaves the variable's value in the environment.
	add(c.StringSlice("secret")...)
	add(strings.Split(os.Getenv("SUME_COM_WEBHOOK_SIGNING_SECRET"), ",")...)
	for _, name := range []string{"api-key", "forward-secret"} {
		add(c.String(name))
	}
	add(os.Getenv("SUME_API_KEY"), os.Getenv("INBOX_FORWARD_SECRET"))
	// A password in a URL flag: the API's, the destination's, NATS's.
	add(urlSecrets(c.String("api-url"), false)...)
	add(urlSecrets(c.String("forward-url"), false)...)
	add(urlSecrets(c.String("nats-url"), true)...)
	// The [[destination]] tables' secrets, the variables they are read
	// from, and their URLs' passwords.
	for _, d := range dests {
		add(d.Secret)
		if d.SecretEnv != "" {
			w.Names = append(w.Names, d.SecretEnv)
		}
		add(urlSecrets(d.URL, false)...)
		add(urlSecrets(d.NATSURL, true)...)
	}
	// The database's password: in --db (INBOX_DB), or where the driver
	// reads one beside it.
	if db := c.String("db"); isPostgres(db) {
		add(dbSecrets(db, os.Getenv)...)
		w.Names = append(w.Names, pgSecretEnv()...)
	}
	file := c.String("config")
	if file == "" {
		return w, nil
	}
	sources, err := config.DescribeSources(file, os.Getenv)
	if err != nil {
		return dispatch.Withheld{}, err
	}
	for _, src := range sources {
		for _, e := range src.Secrets {
			if e.Env != "" {
				w.Names = append(w.Names, e.Env)
				add(os.Getenv(e.Env))
			}
			if e.Key != nil {
				w.Secrets = append(w.Secrets, string(e.Key)) // as decoded: not trimmed
			}
		}
	}
	return w, nil
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
started, and exits 0. SIGHUP reads --config's [[destination]] tables
again (see below). With --admin-addr it answers /healthz, /readyz,
/metrics (its inbox_dispatch_* counters; the queue's gauges are serve's)
and GET /destinations (what inbox destinations --admin prints) there; /readyz fails while its claims and settlements fail to commit,
and its probe claims a row of its own, undone, so it recovers idle; it
says a line per destination: "destination NAME: dispatching", "paused by
an operator" or "unreachable: paused". The inbox_dispatch_* metrics carry
a destination label. While it works it logs at info, at most every 10 s,
per destination, a line "dispatch progress" with its destination (its
name), kind (forward, exec or nats) and the rows handed_on, retried and
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
		Flags: append([]cli.Flag{
			config.DBFlag(),
			config.FileFlag("serve's TOML file of [[source]] and [[destination]] tables: the destinations to hand rows to (instead of --forward-url, --exec or --nats-url); with an exec destination, the variables its secrets are read from are kept from the command"),
			&cli.StringFlag{Name: "admin-addr", Usage: "listen address for /healthz, /readyz, /metrics (the inbox_dispatch_* counters) and GET /destinations; empty: none", EnvVars: []string{"INBOX_DISPATCH_ADMIN_ADDR"}},
			config.BusyTimeoutFlag("how long a write waits for serve's lock (500ms, 3s, 1m)"),
			logLevelFlag(),
		}, append(append(dbWriteFlags(), dispatchFlags()...), reconcileFlags()...)...),
		Action: func(c *cli.Context) error {
			if err := config.NoArgs(c); err != nil {
				return err
			}
			// From the start, so that a SIGHUP never ends dispatch.
			hup, stopHangups := hangups()
			defer stopHangups()
			log, err := newLogger(logOut, c.String("log-level"))
			if err != nil {
				return err
			}
			cfg, err := parseDispatch(c)
			if err != nil {
				return err
			}
			rcfg, err := parseReconcile(c)
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
			db := c.String("db")
			pg, err := parsePGOptions(c, db)
			if err != nil {
				return err
			}
			commits := &health.Commits{}
			ctx, stop := context.WithCancelCause(c.Context)
			defer stop(nil)
			store, err := openStore(ctx, db, storeOptions{
				schema:      schema,
				mustExist:   true,
				busyTimeout: config.DurationOf(c, "busy-timeout").Get(),
				onCommit:    commits.Committed,
				onFileLost:  logLost(log, describeDB(db), fileLost, fileBack),
				wait:        true,
				onDown:      logLost(log, describeDB(db), dbDown, dbBack),
				onFatal:     stop,
				pg:          pg,
			})
			if err != nil {
				return err
			}
			defer store.Close()
			reg := newRegistry()
			rec, err := newReconciler(rcfg, store, nil, log, reg)
			if err != nil {
				return err
			}
			// Made last: from here on only their Run releases them.
			dests, err := newLiveDestinations(ctx, cfg, func() ([]dispatchConfig, error) { return parseDispatch(c) },
				observedQueue{store, commits, true}, store.PausedDestinations, log, reg, true)
			if err != nil {
				return err
			}
			dests.watchRouting(ctx, store)
			log.Info().Str("db", describeDB(db)).Msg("starting")
			rctx, stopReloads := context.WithCancel(ctx)
			reloaded := make(chan struct{})
			go func() {
				defer close(reloaded)
				reloadOnHangup(rctx, hup, c.String("config"), log, dests.reload)
			}()
			err = runWithOps(ctx, dests, rec, rcfg.apiURL, aln, store, commits, reg, log)
			stopReloads()
			<-reloaded
			if err := stoppedBy(ctx, err); err != nil {
				return err
			}
			return store.Close()
		},
	}
}

// runWithOps runs d and rec until ctx is done and, when aln is not nil,
// answers the probes (readiness following commits and d's destinations),
// /metrics, GET /destinations and POST /expect (status URLs on apiURL's
// host) on it meanwhile. If that endpoint fails, the dispatcher is stopped
// too.
func runWithOps(ctx context.Context, d *liveDestinations, rec *reconcile.Reconciler, apiURL string, aln net.Listener, store inbox.Store, commits *health.Commits, reg *prometheus.Registry, log zerolog.Logger) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reconciled := make(chan error, 1)
	go func() { reconciled <- rec.Run(ctx) }()
	if aln == nil {
		err := d.run(ctx)
		cancel()
		return errors.Join(err, <-reconciled)
	}
	ops := http.NewServeMux()
	handleOps(ops, store, commits, reg, log, d.dependencies)
	handleExpect(apiURL, ops, store, log)
	handleDestinations(ops, d)
	dispatched := make(chan error, 1)
	go func() {
		dispatched <- d.run(ctx)
		cancel() // the dispatcher is done: stop answering probes
	}()
	served := receiver.Serve(ctx, receiver.DefaultLimits(), log, receiver.Endpoint{Name: "admin", Listener: aln, Handler: ops})
	cancel()
	return errors.Join(<-dispatched, <-reconciled, served)
}

// observedQueue is the dispatcher's store with the outcome of each of its
// writes (Start, Settle) told to readiness, which follows them as it
// follows the deliveries' commits: on PostgreSQL they run in transactions
// of their own, beside the writer's. A settlement Settle refuses before
// writing (inbox.CheckSettle) is the caller's mistake, not the store's.
// With settles (inbox dispatch, whose readiness is its dispatching), a
// Settle of settlements that fails keeps readiness failing until a Settle
// succeeds (health.Commits.Settled), as the probe cannot meet what it met
// (a row another session holds); serve's readiness is about taking
// webhooks, which such a row does not stop, so there the probe decides.
type observedQueue struct {
	dispatch.Store
	commits *health.Commits
	settles bool
}

func (q observedQueue) Settle(ctx context.Context, owner string, settled []inbox.Settlement, claim inbox.Claim) ([]inbox.Job, int, error) {
	jobs, stale, err := q.Store.Settle(ctx, owner, settled, claim)
	switch {
	case err != nil && inbox.CheckSettle(owner, settled, claim) != nil:
	case q.settles && (err == nil || len(settled) > 0):
		q.commits.Settled(err)
	default:
		q.commits.Observe(err)
	}
	return jobs, stale, err
}

func (q observedQueue) Start(ctx context.Context, owner string, jobs []inbox.Job, now, until time.Time) ([]inbox.Job, error) {
	started, err := q.Store.Start(ctx, owner, jobs, now, until)
	q.commits.Observe(err)
	return started, err
}
