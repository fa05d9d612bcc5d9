package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"inbox/dispatch"
	"inbox/inbox"
)

// The destination flags (--forward-url, --exec, --nats-url and the knobs
// that tune a destination) are the commands' own (serve's and dispatch's);
// they describe a Destination as a [[destination]] table does.

// destinationSet reports whether any destination flag is set.
func destinationSet(c *cli.Context) bool {
	for _, name := range []string{"forward-url", "exec", "nats-url", "nats-subject", "forward-secret"} {
		if c.String(name) != "" {
			return true
		}
	}
	return false
}

// ErrNoDestination is Destinations' answer when neither the flags nor
// --config configure a destination.
var ErrNoDestination = errors.New("no destination: set one of --forward-url, --exec or --nats-url, or [[destination]] tables in --config")

// Destinations reads the destinations of a command's flags: the
// single-destination flags (one destination, named default) or the
// [[destination]] tables of --config, whose knobs left unset take the
// flags' values, each checked once (Destination.Check: a table's knobs
// once it has taken the flags'). It fails with ErrNoDestination when
// there is none, and when both are given, a destination or a knob is
// refused, or --config cannot be read.
func Destinations(c *cli.Context) ([]Destination, error) {
	var tables []Destination
	if file := c.String("config"); file != "" {
		var err error
		if tables, err = LoadDestinations(file, os.Getenv); err != nil {
			return nil, err
		}
	}
	flags := destinationSet(c)
	switch {
	case flags && len(tables) > 0:
		return nil, fmt.Errorf("--config %s has [[destination]] tables, and --forward-url, --exec or --nats-url (with --forward-secret, --nats-subject) configure one more: use the tables or the flags, not both", c.String("config"))
	case !flags && len(tables) == 0:
		return nil, ErrNoDestination
	}
	maxSlow := c.Int("max-slow")
	base := Destination{Name: inbox.DefaultDestination, FromFlags: true,
		URL: c.String("forward-url"), Secret: c.String("forward-secret"), Exec: c.String("exec"),
		NATSURL: c.String("nats-url"), NATSSubject: c.String("nats-subject"),
		Workers: c.Int("workers"), Timeout: DurationOf(c, "timeout").Get(), SlowAfter: DurationOf(c, "slow-after").Get(),
		Lease: DurationOf(c, "lease").Get(), MaxSlow: &maxSlow, RetrySchedule: c.String("retry-schedule")}
	if err := base.CheckKnobs(); err != nil {
		return nil, err
	}
	var dests []Destination
	if flags {
		if err := base.Check(); err != nil {
			return nil, err
		}
		dests = append(dests, base)
	}
	for _, t := range tables {
		d := t.Over(base)
		if err := d.CheckKnobs(); err != nil {
			return nil, fmt.Errorf("--config %s: destination %s: %w", c.String("config"), t.Name, err)
		}
		dests = append(dests, d)
	}
	var w *dispatch.Withheld
	for i := range dests {
		if dests[i].Exec == "" {
			continue
		}
		if w == nil {
			got, err := withheld(c, tables)
			if err != nil {
				return nil, err
			}
			w = &got
		}
		dests[i].Withheld = *w
	}
	return dests, nil
}

// withheld names the secrets an --exec command must not see: every
// variable a [[source.secret]] of --config names, and the values of every
// secret configured, from a flag or its variable alike: the sources', the
// Sume signing secrets (--secret, SUME_COM_WEBHOOK_SIGNING_SECRET), the
// Sume API key (--api-key, SUME_API_KEY), the forward secret, the user
// info of --api-url, --forward-url, --nats-url and a table's broker URLs
// (nats_url, redis_url, amqp_url: BrokerURLs) and, on PostgreSQL, the
// database's password and TLS key password, from the URL or the
// variables the driver reads them from (PGPASSWORD, PGSSLPASSWORD), and
// any variable that holds a copy of one. The config is read
// as inbox sources reads it, so a secret unset here is no error. It fails
// when --config cannot be read.
func withheld(c *cli.Context, dests []Destination) (dispatch.Withheld, error) {
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
	// from, and their URLs' passwords: every broker's URL, a user without
	// a password taken for a token.
	for _, d := range dests {
		add(d.Secret)
		if d.SecretEnv != "" {
			w.Names = append(w.Names, d.SecretEnv)
		}
		add(urlSecrets(d.URL, false)...)
		for _, u := range d.BrokerURLs() {
			add(urlSecrets(u, true)...)
		}
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
	sources, err := DescribeSources(file, os.Getenv)
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

// isPostgres reports whether db is a PostgreSQL URL rather than a path.
func isPostgres(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// pgSecretEnv names the variables the PostgreSQL driver reads a secret
// from beside the URL: the password, and the TLS key's.
func pgSecretEnv() []string { return []string{"PGPASSWORD", "PGSSLPASSWORD"} }

// dbSecrets returns what of a PostgreSQL store an --exec command must not
// see: the URL's secrets (see urlSecrets), its sslpassword, and the values
// getenv gives for pgSecretEnv, which the driver takes when the URL has
// none; nothing for a SQLite path.
func dbSecrets(db string, getenv func(string) string) []string {
	if !isPostgres(db) {
		return nil
	}
	out := urlSecrets(db, false)
	if _, query, ok := strings.Cut(db, "?"); ok {
		if q, err := url.ParseQuery(query); err == nil && q.Get("sslpassword") != "" {
			out = append(out, q.Get("sslpassword"), db)
		}
	}
	for _, name := range pgSecretEnv() {
		if v := getenv(name); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// urlSecrets returns what of a URL an --exec command must not see: the URL
// itself and its password (in the user info or the query, as written and
// decoded) or, with userToken, the user when the user info has no password
// (a token, as nats://token@host has it); nothing for a URL without either.
func urlSecrets(raw string, userToken bool) []string {
	var out []string
	if _, query, ok := strings.Cut(raw, "?"); ok {
		if q, err := url.ParseQuery(query); err == nil && q.Get("password") != "" {
			out = append(out, q.Get("password"))
		}
	}
	_, rest, _ := strings.Cut(raw, "://")
	if at := strings.LastIndex(strings.SplitN(rest, "?", 2)[0], "@"); at >= 0 {
		user, pass, ok := strings.Cut(rest[:at], ":")
		if userToken && (!ok || pass == "") {
			pass = user
		}
		if pass != "" {
			out = append(out, pass)
			if dec, err := url.PathUnescape(pass); err == nil && dec != pass {
				out = append(out, dec)
			}
		}
	}
	if len(out) > 0 {
		out = append(out, raw)
	}
	return out
}
