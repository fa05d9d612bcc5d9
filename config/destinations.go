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
	"inbox/inbox"
	"inbox/scheme"
)

// Destination is one [[destination]] of the configuration file: where the
// rows its filters take are handed, and how. A zero knob takes the
// dispatcher's default.
type Destination struct {
	Name string
	// One of URL (with Secret, read from SecretEnv or the file), Exec, or
	// NATSURL with NATSSubject.
	URL, Secret, SecretEnv string
	Exec                   string
	NATSURL, NATSSubject   string
	// Sources and Events filter the rows it takes; empty takes all.
	Sources, Events []string
	Workers         int
	Timeout         time.Duration
	SlowAfter       time.Duration
	Lease           time.Duration
	MaxSlow         *int   // nil: the default
	RetrySchedule   string // as --retry-schedule takes it; "": the default
	Rate            float64
}

// Route is what d hands to the queue: its name and filters.
func (d Destination) Route() inbox.Route {
	return inbox.Route{Name: d.Name, Sources: d.Sources, Events: d.Events}
}

type fileDestination struct {
	Name          string   `toml:"name"`
	URL           string   `toml:"url"`
	Secret        string   `toml:"secret"`
	SecretEnv     string   `toml:"secret_env"`
	Exec          string   `toml:"exec"`
	NATSURL       string   `toml:"nats_url"`
	NATSSubject   string   `toml:"nats_subject"`
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
// not exactly one of url, exec and nats_url, nats_url without
// nats_subject, a secret beside exec or nats_url, a secret set both ways,
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
	if !ValidName(fd.Name) {
		return Destination{}, errors.New("name must be 1 to 32 of a-z, 0-9, - and _")
	}
	kinds := 0
	for _, v := range []string{fd.URL, fd.Exec, fd.NATSURL} {
		if v != "" {
			kinds++
		}
	}
	switch {
	case kinds != 1:
		return Destination{}, errors.New("set exactly one of url, exec and nats_url")
	case (fd.NATSURL == "") != (fd.NATSSubject == ""):
		return Destination{}, errors.New("nats_url and nats_subject go together")
	case fd.URL == "" && (fd.Secret != "" || fd.SecretEnv != ""):
		return Destination{}, errors.New("secret and secret_env sign what url posts: set them with url only")
	case fd.Secret != "" && fd.SecretEnv != "":
		return Destination{}, errors.New("set secret or secret_env, not both")
	}
	if fd.URL != "" {
		if u, err := url.Parse(fd.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return Destination{}, errors.New("url must be an http:// or https:// URL")
		}
	}
	d := Destination{Name: fd.Name, URL: fd.URL, Secret: fd.Secret, SecretEnv: fd.SecretEnv, Exec: fd.Exec,
		NATSURL: fd.NATSURL, NATSSubject: fd.NATSSubject, Sources: fd.Sources, Events: fd.Events,
		Workers: fd.Workers, MaxSlow: fd.MaxSlow, RetrySchedule: fd.RetrySchedule}
	if fd.SecretEnv != "" {
		if getenv == nil || strings.TrimSpace(getenv(fd.SecretEnv)) == "" {
			return Destination{}, fmt.Errorf("secret_env %s is unset", fd.SecretEnv)
		}
		d.Secret = strings.TrimSpace(getenv(fd.SecretEnv))
	}
	if deploy.Placeholder(d.Secret) {
		return Destination{}, errors.New("the secret is the placeholder of the shipped inbox.env: make a secret with inbox secret")
	}
	if _, err := scheme.StandardKey(d.Secret); err != nil {
		const hint = "make one with inbox secret (a raw key K signs as whsec_ and the base64 of K)"
		if fd.SecretEnv != "" {
			return Destination{}, fmt.Errorf("secret_env %s: %w: %s", fd.SecretEnv, err, hint)
		}
		if strings.HasPrefix(err.Error(), "secret: ") { // named already
			return Destination{}, fmt.Errorf("%w: %s", err, hint)
		}
		return Destination{}, fmt.Errorf("secret: %w: %s", err, hint)
	}
	for _, s := range fd.Sources {
		if !sources[s] {
			return Destination{}, fmt.Errorf("sources names %q, which no [[source]] configures", s)
		}
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
