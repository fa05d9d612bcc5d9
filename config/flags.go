package config

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/inbox"
)

// The flags are built per command: urfave/cli's Apply writes a value from
// the environment into the flag itself, so one shared value would carry
// state from one run to the next.

// DBFlag is --db, the database path every command takes.
func DBFlag() *cli.StringFlag {
	return &cli.StringFlag{
		Name:    "db",
		Usage:   "the inbox database: a SQLite file's path, or a postgres:// URL (PostgreSQL, shared by replicas; a keyword=value connection string is refused: give it as a URL)",
		Value:   "inbox.db",
		EnvVars: []string{"INBOX_DB"},
	}
}

// EventsFlag is --event, the event names stored as jobs; serve and
// reprocess share it so both classify alike.
func EventsFlag() *cli.StringSliceFlag {
	return &cli.StringSliceFlag{
		Name:    "event",
		Value:   cli.NewStringSlice("job.completed", "job.failed", "job.canceled"),
		Usage:   "event names stored as jobs; others are parked unknown_event",
		EnvVars: []string{"INBOX_EVENTS"},
	}
}

// MaxBodyFlag is --max-body, the normal body limit; serve and reprocess
// share it.
func MaxBodyFlag() *cli.StringFlag {
	return &cli.StringFlag{
		Name:    "max-body",
		Value:   "1MiB",
		Usage:   "larger verified bodies are parked too_large",
		EnvVars: []string{"INBOX_MAX_BODY"},
	}
}

// Rules reads the classification rules from EventsFlag and MaxBodyFlag.
func Rules(c *cli.Context) (inbox.Rules, error) {
	maxBody, err := ParseSize(c.String("max-body"))
	if err != nil {
		return inbox.Rules{}, fmt.Errorf("--max-body: %w", err)
	}
	events, err := SplitList(c.StringSlice("event"))
	if err != nil {
		return inbox.Rules{}, fmt.Errorf("--event: %w", err)
	}
	return inbox.Rules{Events: events, MaxBody: maxBody}, nil
}

// BusyTimeoutFlag is --busy-timeout (INBOX_BUSY_TIMEOUT) for a command
// that writes beside serve, refusing a value the store could not honour:
// zero, negative, or under the millisecond SQLite counts in (which would
// be no wait at all), from the command line or the environment alike.
func BusyTimeoutFlag(usage string) *cli.GenericFlag {
	return DurationFlag("busy-timeout", inbox.DefaultBusyTimeout, usage, "INBOX_BUSY_TIMEOUT", checkBusyTimeout)
}

// checkBusyTimeout refuses a busy timeout under a millisecond: SQLite
// counts it in whole milliseconds, and 0 means a write never waits for
// serve's lock, while the store would take a negative one for its default.
func checkBusyTimeout(d time.Duration) error {
	if d < time.Millisecond {
		return errors.New("want a positive duration of at least 1ms, such as 3s")
	}
	return nil
}

// NoArgs refuses any argument, for the commands that take none: a stray
// word (a misplaced value, a flag after one) must not be silently ignored.
//
// A flag after the first argument was not read as one (the flag parser
// stops there), which the error says: the argument is most often a value
// given to a flag that takes none (--json true).
func NoArgs(c *cli.Context) error {
	if c.Args().Len() == 0 {
		return nil
	}
	first := c.Args().First()
	for _, a := range c.Args().Tail() {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		if first == "true" || first == "false" {
			return fmt.Errorf("%s takes no arguments, got %q, and %s after it was not read as a flag (flags after an argument are not): a flag that takes no value goes alone or as --flag=false, never as --flag false", c.Command.Name, first, a)
		}
		return fmt.Errorf("%s takes no arguments, got %q, and %s after it was not read as a flag (flags after an argument are not): remove %q", c.Command.Name, first, a, first)
	}
	return fmt.Errorf("%s takes no arguments, got %q (flags go before their values: --flag value)", c.Command.Name, c.Args().First())
}

// SplitList trims each value and rejects empty ones, so "a,,b" or a blank
// secret is an error rather than a silently shorter list.
func SplitList(vals []string) ([]string, error) {
	out := make([]string, 0, len(vals))
	for _, v := range vals {
		v = strings.TrimSpace(v)
		if v == "" {
			return nil, errors.New("empty value in list")
		}
		out = append(out, v)
	}
	return out, nil
}

// ParseSize reads a byte count: a plain number, or one with a KiB, MiB or
// GiB suffix.
func ParseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range units {
		if n, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = strings.TrimSpace(n), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > (1<<40)/mult {
		return 0, fmt.Errorf("invalid size %q: want a positive number of bytes, optionally with KiB, MiB or GiB", s)
	}
	return n * mult, nil
}

// FileFlag is --config, the sources file serve, reprocess and sources
// read, with each command's own usage.
func FileFlag(usage string) *cli.StringFlag {
	return &cli.StringFlag{Name: "config", Usage: usage, EnvVars: []string{"INBOX_CONFIG"}}
}

// configKeys names, for each flag Excludes may refuse, what takes its
// place in the file.
var configKeys = map[string]string{
	"secret":      "[[source.secret]]",
	"path":        "path",
	"tolerance":   "tolerance",
	"event":       "events",
	"max-body":    "max_body",
	"max-request": "max_request",
}

// Excludes refuses, when --config is given, the named flags that
// describe the one Sume source without it: the file describes every
// source, so such a flag would be silently ignored. Each is refused when
// given on the command line or through its environment variable, except
// SUME_COM_WEBHOOK_SIGNING_SECRET, which a [[source.secret]] may name (env =
// ...): --secret counts only when given on the command line.
func Excludes(c *cli.Context, names ...string) error {
	file := c.String("config")
	if file == "" {
		return nil
	}
	for _, name := range names {
		if !c.IsSet(name) || (name == "secret" && !secretOnCommandLine(c)) {
			continue
		}
		if name == "secret" {
			// The variable stays allowed: a config secret may name it.
			return fmt.Errorf("--secret conflicts with --config %s: the file sets each source's %s; drop the flag (a source may still read SUME_COM_WEBHOOK_SIGNING_SECRET through env =)", file, configKeys[name])
		}
		flag := "--" + name
		if env := flagEnv(c, name); env != "" {
			flag += " (or " + env + ")"
		}
		return fmt.Errorf("%s conflicts with --config %s: the file sets each source's %s; drop the flag or the variable", flag, file, configKeys[name])
	}
	return nil
}

// flagEnv returns the environment variable of the command's flag name, or
// "".
func flagEnv(c *cli.Context, name string) string {
	for _, f := range c.Command.Flags {
		if df, ok := f.(cli.DocGenerationFlag); ok && slices.Contains(f.Names(), name) && len(df.GetEnvVars()) > 0 {
			return df.GetEnvVars()[0]
		}
	}
	return ""
}

// secretOnCommandLine reports whether --secret was given on the command
// line: a value given there replaces the environment variable's.
func secretOnCommandLine(c *cli.Context) bool {
	env, ok := os.LookupEnv("SUME_COM_WEBHOOK_SIGNING_SECRET")
	if !ok {
		return true // set, and not through the variable
	}
	return !slices.Equal(c.StringSlice("secret"), strings.Split(env, ","))
}

// SourceRules returns the classification rules of every source: those of
// --config's sources, or without it the one Sume source's, from --event and
// --max-body (which are refused together with --config).
func SourceRules(c *cli.Context) (inbox.SourceRules, error) {
	file := c.String("config")
	if file == "" {
		r, err := Rules(c)
		if err != nil {
			return nil, err
		}
		return inbox.SourceRules{inbox.DefaultSource: r}, nil
	}
	if err := Excludes(c, "event", "max-body"); err != nil {
		return nil, err
	}
	sources, err := LoadSources(file, nil)
	if err != nil {
		return nil, err
	}
	sr := inbox.SourceRules{}
	for _, src := range sources {
		sr[src.Name] = src.Rules
	}
	return sr, nil
}
