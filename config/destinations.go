package config

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"inbox/deploy"
	"inbox/dispatch"
	"inbox/inbox"
	"inbox/scheme"
)

// Destination is the one checked description of a destination, from the
// flags (--forward-url, --exec or --nats-url and the knobs: the one named
// default) or from a [[destination]] table of the configuration file (any
// kind: see kinds):
// where the rows its filters take are handed, and how. Both are checked by
// Check, in the words of where they were described; a table's knobs left
// unset take the flags' (Over). A zero knob takes the dispatcher's
// default.
type Destination struct {
	Name string
	// One of URL (with Secret, read from SecretEnv or the file), Exec,
	// NATSURL with NATSSubject, or RedisURL with RedisStream (a Redis
	// stream, trimmed to about RedisMaxLen entries; 0: never) or with
	// BullMQQueue (a BullMQ queue under BullMQPrefix; "": bull), or
	// AMQPURL with AMQPExchange ("": the default exchange) and
	// AMQPRoutingKey (RabbitMQ). A table chooses the kind by its key (see
	// kinds); the flags take the first three.
	URL, Secret, SecretEnv    string
	Exec                      string
	NATSURL, NATSSubject      string
	RedisURL, RedisStream     string
	RedisMaxLen               int64
	BullMQQueue, BullMQPrefix string
	AMQPURL, AMQPExchange     string
	AMQPRoutingKey            string
	// Sources and Events filter the rows it takes; empty takes all.
	Sources, Events []string
	Workers         int
	Timeout         time.Duration
	SlowAfter       time.Duration
	Lease           time.Duration
	MaxSlow         *int   // nil: the default; 0: none
	RetrySchedule   string // as --retry-schedule takes it; "": the default
	Rate            float64
	// Withheld is what an Exec command must not see (see dispatch.Withheld).
	Withheld dispatch.Withheld
	// FromFlags is set on the destination the flags describe: its errors
	// name the flags rather than a table's keys.
	FromFlags bool
}

// Route is what d hands to the queue: its name and filters.
func (d Destination) Route() inbox.Route {
	return inbox.Route{Name: d.Name, Sources: d.Sources, Events: d.Events}
}

// Schedule is d's retry schedule, read as ParseSchedule does; Check
// refuses one it cannot read.
func (d Destination) Schedule() []time.Duration {
	s, _ := dispatch.ParseSchedule(d.RetrySchedule)
	return s
}

// Over is d with the knobs it leaves unset taken from base (the flags').
func (d Destination) Over(base Destination) Destination {
	if d.Workers == 0 {
		d.Workers = base.Workers
	}
	if d.Timeout == 0 {
		d.Timeout = base.Timeout
	}
	if d.SlowAfter == 0 {
		d.SlowAfter = base.SlowAfter
	}
	if d.Lease == 0 {
		d.Lease = base.Lease
	}
	if d.MaxSlow == nil {
		d.MaxSlow = base.MaxSlow
	}
	if d.RetrySchedule == "" {
		d.RetrySchedule = base.RetrySchedule
	}
	return d
}

// Check refuses what d cannot be: a name that is not one, not exactly one
// kind, a kind without a key it needs or with another's (checkKind),
// a url that is not http(s) (a table's), a placeholder secret or one not
// in the Standard Webhooks form, and a knob out of range (CheckKnobs).
// Its errors name the flags or the table's keys, as d was described, and
// never hold a secret. A table's two halves are checked as it is read
// (LoadDestinations: where it hands rows) and once it has taken the
// flags' knobs (Destinations).
func (d Destination) Check() error {
	if d.FromFlags {
		if err := d.checkFlags(); err != nil {
			return err
		}
	} else if err := d.checkTable(); err != nil {
		return err
	}
	return d.CheckKnobs()
}

// checkFlags is Check's look at where the flags' destination hands rows.
func (d Destination) checkFlags() error {
	var chosen []string
	for _, k := range [][2]string{{"--forward-url", d.URL}, {"--exec", d.Exec}, {"--nats-url", d.NATSURL}} {
		if k[1] != "" {
			chosen = append(chosen, k[0])
		}
	}
	switch {
	case len(chosen) == 0:
		return errors.New("no destination: set one of --forward-url, --exec or --nats-url")
	case len(chosen) > 1:
		return fmt.Errorf("one destination only, got %s", strings.Join(chosen, " and "))
	case d.Secret != "" && d.URL == "":
		return errors.New("--forward-secret needs --forward-url")
	case (d.NATSURL == "") != (d.NATSSubject == ""):
		return errors.New("--nats-url and --nats-subject go together")
	case deploy.Placeholder(d.Secret):
		return errors.New("INBOX_FORWARD_SECRET (or --forward-secret) holds the placeholder of the shipped inbox.env: make a secret with inbox secret")
	}
	if _, err := scheme.StandardKey(d.Secret); err != nil {
		return fmt.Errorf("INBOX_FORWARD_SECRET (or --forward-secret): %w: %s", err, secretHint)
	}
	return nil
}

// secretHint says how to make a secret a destination signs with.
const secretHint = "make one with inbox secret (a raw key K signs as whsec_ and the base64 of K)"

// checkTable is Check's look at where a table's destination hands rows.
func (d Destination) checkTable() error {
	if !ValidName(d.Name) {
		return errors.New("name must be 1 to 32 of a-z, 0-9, - and _")
	}
	if err := d.checkKind(); err != nil {
		return err
	}
	if d.RedisMaxLen < 0 {
		return fmt.Errorf("redis_maxlen must be 0 (no trim) or more, got %d", d.RedisMaxLen)
	}
	if d.URL != "" {
		if u, err := url.Parse(d.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errors.New("url must be an http:// or https:// URL")
		}
	}
	if deploy.Placeholder(d.Secret) {
		return errors.New("the secret is the placeholder of the shipped inbox.env: make a secret with inbox secret")
	}
	if _, err := scheme.StandardKey(d.Secret); err != nil {
		if d.SecretEnv != "" {
			return fmt.Errorf("secret_env %s: %w: %s", d.SecretEnv, err, secretHint)
		}
		if strings.HasPrefix(err.Error(), "secret: ") { // named already
			return fmt.Errorf("%w: %s", err, secretHint)
		}
		return fmt.Errorf("secret: %w: %s", err, secretHint)
	}
	return nil
}

// CheckKnobs refuses a knob of d out of range, naming it as d was
// described: the flags check theirs before a table takes them (Over).
func (d Destination) CheckKnobs() error {
	maxSlow, schedule := "max_slow", "retry_schedule"
	if d.FromFlags {
		maxSlow, schedule = "--max-slow", "--retry-schedule"
	}
	if d.MaxSlow != nil && *d.MaxSlow < 0 {
		return fmt.Errorf("%s must be 0 or more, got %d", maxSlow, *d.MaxSlow)
	}
	if d.RetrySchedule != "" || d.FromFlags {
		if _, err := dispatch.ParseSchedule(d.RetrySchedule); err != nil {
			return fmt.Errorf("%s: %w", schedule, err)
		}
	}
	return nil
}

type fileDestination struct {
	Name          string   `toml:"name"`
	URL           string   `toml:"url"`
	Secret        string   `toml:"secret"`
	SecretEnv     string   `toml:"secret_env"`
	Exec          string   `toml:"exec"`
	NATSURL       string   `toml:"nats_url"`
	NATSSubject   string   `toml:"nats_subject"`
	RedisURL      string   `toml:"redis_url"`
	RedisStream   string   `toml:"redis_stream"`
	RedisMaxLen   int64    `toml:"redis_maxlen"`
	BullMQQueue   string   `toml:"bullmq_queue"`
	BullMQPrefix  string   `toml:"bullmq_prefix"`
	AMQPURL       string   `toml:"amqp_url"`
	AMQPExchange  string   `toml:"amqp_exchange"`
	AMQPRouting   string   `toml:"amqp_routing_key"`
	Sources       []string `toml:"sources"`
	Events        []string `toml:"events"`
	Workers       int      `toml:"workers"`
	Timeout       string   `toml:"timeout"`
	SlowAfter     string   `toml:"slow_after"`
	MaxSlow       *int     `toml:"max_slow"`
	Lease         string   `toml:"lease"`
	RetrySchedule string   `toml:"retry_schedule"`
	Rate          string   `toml:"rate"`
}

// LoadDestinations reads the [[destination]] tables of a configuration
// file, taking each secret_env from getenv; none is no error. It fails on
// an unreadable file, an unknown key, a missing, invalid or repeated name,
// not exactly one kind (url, exec, nats_url, redis_stream, bullmq_queue,
// amqp_url),
// a kind without a key it needs (nats_subject, redis_url) or with another
// kind's key (a secret beside exec), a negative redis_maxlen, a secret set both ways,
// a secret_env that is unset, a placeholder secret or one not in the
// Standard Webhooks form (whsec_ and base64), a filter naming a
// source the file does not configure, and an unreadable knob. Its errors
// never hold a secret.
func LoadDestinations(path string, getenv func(string) string) ([]Destination, error) {
	fc, err := decodeFile(path)
	if err != nil {
		return nil, err
	}
	sources := map[string]bool{}
	for _, s := range fc.Source {
		sources[s.Name] = true
	}
	var out []Destination
	names := map[string]bool{}
	for i, fd := range fc.Destination {
		d, err := fd.destination(getenv, sources)
		if err != nil {
			return nil, fmt.Errorf("config %s: destination %d (%s): %w", path, i+1, fd.Name, err)
		}
		if names[d.Name] {
			return nil, fmt.Errorf("config %s: destination %s: name used twice", path, d.Name)
		}
		names[d.Name] = true
		out = append(out, d)
	}
	return out, nil
}

// LoadRoutes reads the names and filters of the [[destination]] tables of
// a configuration file, and nothing else: no secret is read, so a command
// that only needs to know which rows each destination takes runs without
// the destinations' environment. It fails on an unreadable file, an
// unknown key, and a missing, invalid or repeated name.
func LoadRoutes(path string) ([]inbox.Route, error) {
	fc, err := decodeFile(path)
	if err != nil {
		return nil, err
	}
	routes := []inbox.Route{}
	names := map[string]bool{}
	for i, fd := range fc.Destination {
		if !ValidName(fd.Name) || names[fd.Name] {
			return nil, fmt.Errorf("config %s: destination %d (%s): name must be 1 to 32 of a-z, 0-9, - and _, and used once", path, i+1, fd.Name)
		}
		names[fd.Name] = true
		routes = append(routes, inbox.Route{Name: fd.Name, Sources: fd.Sources, Events: fd.Events})
	}
	return routes, nil
}

func (fd fileDestination) destination(getenv func(string) string, sources map[string]bool) (Destination, error) {
	if fd.Secret != "" && fd.SecretEnv != "" {
		return Destination{}, errors.New("set secret or secret_env, not both")
	}
	d := Destination{Name: fd.Name, URL: fd.URL, Secret: fd.Secret, SecretEnv: fd.SecretEnv, Exec: fd.Exec,
		NATSURL: fd.NATSURL, NATSSubject: fd.NATSSubject, RedisURL: fd.RedisURL, RedisStream: fd.RedisStream,
		RedisMaxLen: fd.RedisMaxLen, BullMQQueue: fd.BullMQQueue, BullMQPrefix: fd.BullMQPrefix,
		AMQPURL: fd.AMQPURL, AMQPExchange: fd.AMQPExchange, AMQPRoutingKey: fd.AMQPRouting, Sources: fd.Sources, Events: fd.Events,
		Workers: fd.Workers, MaxSlow: fd.MaxSlow, RetrySchedule: fd.RetrySchedule}
	if fd.SecretEnv != "" && fd.URL != "" {
		if getenv == nil || strings.TrimSpace(getenv(fd.SecretEnv)) == "" {
			return Destination{}, fmt.Errorf("secret_env %s is unset", fd.SecretEnv)
		}
		d.Secret = strings.TrimSpace(getenv(fd.SecretEnv))
	}
	if fd.Workers < 0 {
		return Destination{}, fmt.Errorf("workers must be positive, got %d", fd.Workers)
	}
	for _, k := range []struct {
		name, v string
		to      *time.Duration
	}{{"timeout", fd.Timeout, &d.Timeout}, {"slow_after", fd.SlowAfter, &d.SlowAfter}, {"lease", fd.Lease, &d.Lease}} {
		if k.v == "" {
			continue
		}
		v, err := time.ParseDuration(k.v)
		if err != nil || v < 0 {
			return Destination{}, fmt.Errorf("%s %q: want a duration such as 30s", k.name, k.v)
		}
		*k.to = v
	}
	if fd.Rate != "" {
		r, err := ParseRate(fd.Rate)
		if err != nil {
			return Destination{}, err
		}
		d.Rate = r
	}
	// Its knobs are checked once it has taken the flags' (Destinations).
	if err := d.checkTable(); err != nil {
		return Destination{}, err
	}
	for _, s := range fd.Sources {
		if !sources[s] {
			return Destination{}, fmt.Errorf("sources names %q, which no [[source]] configures", s)
		}
	}
	return d, nil
}

// decodeFile reads the configuration file at path, as readFile does. It
// fails on an unreadable file, on one that is not a regular file of at
// most MaxFileSize bytes or not read within ReadTimeout, and on an unknown
// key: a misspelt option must not be silently ignored.
func decodeFile(path string) (fileConfig, error) {
	var fc fileConfig
	b, err := readFile(path)
	if err != nil {
		return fileConfig{}, fmt.Errorf("config %s: %w", path, err)
	}
	md, err := toml.Decode(string(b), &fc)
	if err != nil {
		return fileConfig{}, fmt.Errorf("config %s: %w", path, valueFree(err))
	}
	if und := md.Undecoded(); len(und) > 0 {
		return fileConfig{}, fmt.Errorf("config %s: unknown key %s", path, und[0])
	}
	if err := exactKeys(md, reflect.TypeOf(fc)); err != nil {
		return fileConfig{}, fmt.Errorf("config %s: %w", path, err)
	}
	return fc, nil
}

// quotedText is a value a TOML syntax error quotes from the file.
var quotedText = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'[^']*'`)

// valueFree is a TOML syntax error without the text it quotes from the
// file, which may be the start of a secret written unquoted (secret =
// whsec_...): where it is, and what was wrong, but none of the value.
func valueFree(err error) error {
	var pe toml.ParseError
	if !errors.As(err, &pe) {
		return err
	}
	msg := quotedText.ReplaceAllString(pe.Message, "(text not shown)")
	return fmt.Errorf("line %d, column %d: %s", pe.Position.Line, pe.Position.Col, msg)
}

// ParseRate reads a ceiling on requests, "50/s" or "600/m", as requests a
// second. It refuses NaN and infinities, which ParseFloat takes, and a
// rate slower than MinRate: a destination's limiter would never start a
// second attempt, and a replay's rows would be due centuries on.
func ParseRate(s string) (float64, error) {
	n, per, ok := strings.Cut(strings.TrimSpace(s), "/")
	v, err := strconv.ParseFloat(n, 64)
	if !ok || err != nil || !(v > 0) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("rate %q: want requests per second or minute, such as 50/s or 600/m", s)
	}
	switch per {
	case "s":
	case "m":
		v /= 60
	default:
		return 0, fmt.Errorf("rate %q: want requests per second or minute, such as 50/s or 600/m", s)
	}
	if v < MinRate {
		return 0, fmt.Errorf("rate %q: slower than one an hour (0.0167/m): want requests per second or minute, such as 50/s or 600/m", s)
	}
	return v, nil
}

// MinRate is the slowest rate ParseRate takes, a second: one an hour.
const MinRate = 1.0 / 3600
