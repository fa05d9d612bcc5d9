// Package admin holds the operator's commands, one file each. Every command
// opens the store --db names on its own, through the Opener main gives it,
// so it works while serve runs: on SQLite, reads through query-only
// connections, writes in IMMEDIATE transactions that wait up to
// --busy-timeout for serve's lock.
package admin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/inbox"
)

// Access is how a command opens the store.
type Access struct {
	// Write opens it for writing; otherwise it is opened read-only, and
	// any write fails.
	Write bool
	// BusyTimeout is how long a write waits for the lock serve or another
	// command holds.
	BusyTimeout time.Duration
}

// Opener opens the existing store db (--db) names, as a asks. It never
// creates one: a mistyped path is an error, not a new database.
type Opener func(ctx context.Context, db string, a Access) (inbox.Store, error)

// Commands returns the admin commands, which open their stores with open.
func Commands(open Opener) []*cli.Command {
	return []*cli.Command{
		listCommand(open),
		statsCommand(open),
		parkedCommand(open),
		showCommand(open),
		reprocessCommand(open),
		redeliverCommand(open, nil),
		alertCommand(open),
		purgeCommand(open),
		sendCommand(),
		backupCommand(open),
		sourcesCommand(open),
		missedCommand(open),
		expectCommand(open),
		expectedCommand(open),
	}
}

// The flags are built per command: urfave/cli's Apply writes a value from
// the environment into the flag itself, so one shared value would carry
// state from one run to the next.

// DBFlag is --db, the database path every command takes.
func DBFlag() *cli.StringFlag {
	return &cli.StringFlag{
		Name:    "db",
		Usage:   "the inbox database: a SQLite file's path, or a postgres:// URL (PostgreSQL, shared by replicas)",
		Value:   "inbox.db",
		EnvVars: []string{"INBOX_DB"},
	}
}

func jsonFlag() *cli.BoolFlag {
	return &cli.BoolFlag{
		Name:    "json",
		Usage:   "print JSON, one object per line, for scripts",
		EnvVars: []string{"INBOX_JSON"},
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

// reasonFlag is --reason, with an environment variable of each command's
// own: one shared variable left set for one command would widen another's
// selection (redeliver would add every parked job to the ids given).
func reasonFlag(usage, env string) *cli.StringFlag {
	return &cli.StringFlag{Name: "reason", Usage: usage, EnvVars: []string{env}}
}

// reason reads --reason; "" when it is not set.
func reason(c *cli.Context) (inbox.Reason, error) {
	r := inbox.Reason(c.String("reason"))
	if r != "" && !r.Valid() {
		return "", fmt.Errorf("unknown reason %q: want one of %s", r, joinReasons())
	}
	return r, nil
}

func joinReasons() string {
	reasons := inbox.Reasons()
	names := make([]string, len(reasons))
	for i, r := range reasons {
		names[i] = string(r)
	}
	return strings.Join(names, ", ")
}

func dryRunFlag() *cli.BoolFlag {
	return &cli.BoolFlag{Name: "dry-run", Usage: "print what would change and change nothing", EnvVars: []string{"INBOX_DRY_RUN"}}
}

func busyTimeoutFlag() *cli.DurationFlag {
	return BusyTimeoutFlag("how long a write waits for the lock serve or another command holds")
}

// BusyTimeoutFlag is --busy-timeout (INBOX_BUSY_TIMEOUT) for a command
// that writes beside serve, refusing a value the store could not honour:
// zero, negative, or under the millisecond SQLite counts in (which would
// be no wait at all), from the command line or the environment alike.
func BusyTimeoutFlag(usage string) *cli.DurationFlag {
	return &cli.DurationFlag{
		Name:    "busy-timeout",
		Value:   inbox.DefaultBusyTimeout,
		Usage:   usage + " (500ms, 3s, 1m)",
		EnvVars: []string{"INBOX_BUSY_TIMEOUT"},
		Action: func(_ *cli.Context, d time.Duration) error {
			return CheckBusyTimeout(d)
		},
	}
}

// CheckBusyTimeout refuses a busy timeout under a millisecond: SQLite
// counts it in whole milliseconds, and 0 means a write never waits for
// serve's lock, while the store would take a negative one for its default.
func CheckBusyTimeout(d time.Duration) error {
	if d < time.Millisecond {
		return fmt.Errorf("--busy-timeout %s: want a positive duration of at least 1ms, such as 3s", d)
	}
	return nil
}

// args returns the command's arguments. A flag after them is refused:
// the flag parser stops at the first argument, so it would be taken for
// one.
func args(c *cli.Context) ([]string, error) {
	for _, a := range c.Args().Slice() {
		if strings.HasPrefix(a, "-") {
			return nil, fmt.Errorf("%s after the arguments (%s): flags go before them", a, c.Command.ArgsUsage)
		}
	}
	return c.Args().Slice(), nil
}

// NoArgs refuses any argument, for the commands that take none: a stray
// word (a misplaced value, a flag after one) must not be silently ignored.
func NoArgs(c *cli.Context) error {
	if c.Args().Len() > 0 {
		return fmt.Errorf("%s takes no arguments, got %q (flags go before their values: --flag value)", c.Command.Name, c.Args().First())
	}
	return nil
}

// openRead opens the store named by --db for reading; it never creates
// one.
func openRead(c *cli.Context, open Opener) (inbox.Store, error) {
	return open(c.Context, c.String("db"), Access{BusyTimeout: inbox.DefaultBusyTimeout})
}

// openWrite opens the store named by --db for writing; it never creates
// one, and its writes wait up to --busy-timeout for another process's lock.
func openWrite(c *cli.Context, open Opener) (inbox.Store, error) {
	return open(c.Context, c.String("db"), Access{Write: true, BusyTimeout: c.Duration("busy-timeout")})
}

// printRows prints vals as JSON lines with --json, exactly as stored (see
// printJSONLines), else as an aligned table: head (cells separated by
// tabs), then the cells of each value (see rowPrinter).
func printRows[T any](c *cli.Context, vals []T, head string, cells func(T) []string) error {
	p := newRowPrinter(c, head, cells)
	for _, v := range vals {
		if err := p.add(v); err != nil {
			return err
		}
	}
	return p.flush()
}

// tableBlock is how many rows are held before they are written out: a
// million rows are printed as they are read, a table's columns aligned
// block by block.
const tableBlock = 256

// rowPrinter prints values as they come: as JSON lines with --json (see
// printJSONLines), else as a table, head first, each cell through cell, so
// no stored text can drive the terminal or widen the table without bound,
// and the id and key columns (wholeColumns) through idCell, escaped but
// never cut. Its written counts the values written out so far.
type rowPrinter[T any] struct {
	c       *cli.Context
	w       *bufio.Writer
	tw      *tabwriter.Writer // nil with --json
	names   []string
	cells   func(T) []string
	pending int
	written int
}

func newRowPrinter[T any](c *cli.Context, head string, cells func(T) []string) *rowPrinter[T] {
	p := &rowPrinter[T]{c: c, cells: cells, w: bufio.NewWriterSize(c.App.Writer, 64<<10)}
	if !c.Bool("json") {
		p.tw = tabwriter.NewWriter(p.w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(p.tw, head)
		p.names = strings.Split(head, "\t")
	}
	return p
}

// add prints v, or holds it for the table's next block.
func (p *rowPrinter[T]) add(v T) error {
	if p.tw == nil {
		if err := encodeExact(p.w, v); err != nil {
			return err
		}
	} else {
		p.table(v)
	}
	if p.pending++; p.pending == tableBlock {
		return p.flush()
	}
	return nil
}

// table adds v's cells to the table.
func (p *rowPrinter[T]) table(v T) {
	row := p.cells(v)
	for i, s := range row {
		if i < len(p.names) && wholeColumns[p.names[i]] {
			row[i] = idCell(s)
		} else {
			row[i] = cell(s)
		}
	}
	fmt.Fprintln(p.tw, strings.Join(row, "\t"))
}

// flush writes out the rows held.
func (p *rowPrinter[T]) flush() error {
	var err error
	if p.tw != nil {
		err = p.tw.Flush()
	}
	if err == nil {
		err = p.w.Flush()
	}
	if err == nil {
		p.written += p.pending
	}
	p.pending = 0
	return err
}

// readTimeoutFlag is --timeout, the bound of a command that reads.
func readTimeoutFlag() *cli.StringFlag {
	return &cli.StringFlag{
		Name:    "timeout",
		Value:   defaultReadTimeout,
		Usage:   "give up reading after this long, saying how far it got (30s, 5m, 1h)",
		EnvVars: []string{"INBOX_READ_TIMEOUT"},
	}
}

// defaultReadTimeout is --timeout's default: a million rows are listed in
// seconds.
const defaultReadTimeout = "30s"

// readContext returns c's context bounded by --timeout.
func readContext(c *cli.Context) (context.Context, context.CancelFunc, error) {
	raw := c.String("timeout")
	d, err := time.ParseDuration(strings.TrimSpace(raw))
	if err != nil || d <= 0 {
		return nil, nil, fmt.Errorf("--timeout %q: want a positive duration such as 30s, 5m or 1h", raw)
	}
	ctx, cancel := context.WithTimeout(c.Context, d)
	return ctx, cancel, nil
}

// stopped returns err, a read's, as the line that says it ran out of
// --timeout when ctx, the read's context, did, with how many rows were
// written before.
func stopped(c *cli.Context, ctx context.Context, err error, written int) error {
	if err == nil || !errors.Is(ctx.Err(), context.DeadlineExceeded) || c.Context.Err() != nil {
		return err
	}
	return fmt.Errorf("%s: stopped after %s (--timeout): %s rows written; raise --timeout", c.Command.Name, strings.TrimSpace(c.String("timeout")), thousands(int64(written)))
}

// wholeColumns are the columns that hold a row id or a key, which a table
// prints whole (see idCell): cut, it is no id that show or expect finds.
var wholeColumns = map[string]bool{"ID": true, "KEY": true, "JOB": true}

// tableLine joins cells with tabs for a tabwriter, each through cell.
func tableLine(cells ...string) string {
	for i, s := range cells {
		cells[i] = cell(s)
	}
	return strings.Join(cells, "\t")
}

// printJSONLines writes each value as one line of JSON, exact for strings
// that are not UTF-8 (see encodeExact).
func printJSONLines[T any](w io.Writer, vals []T) error {
	for _, v := range vals {
		if err := encodeExact(w, v); err != nil {
			return err
		}
	}
	return nil
}

// timeFormat is how tables print times: UTC, to the second.
const timeFormat = "2006-01-02T15:04:05Z"

func formatTime(t time.Time) string { return t.UTC().Format(timeFormat) }

// ageFlag is a duration flag that also takes whole days ("30d"), the unit
// retention is thought in.
func ageFlag(name, value, usage, env string) *cli.StringFlag {
	return &cli.StringFlag{Name: name, Value: value, Usage: usage + " (90m, 24h, 30d)", EnvVars: []string{env}}
}

// age reads an ageFlag: 0 when it is empty, an error when it is negative
// or unreadable.
func age(c *cli.Context, name string) (time.Duration, error) {
	s := strings.TrimSpace(c.String(name))
	if s == "" {
		return 0, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n >= 0 && n <= 100*365 {
			return time.Duration(n) * 24 * time.Hour, nil
		}
	} else if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return d, nil
	}
	// As typed, spaces too: the operator must find it in what they wrote.
	return 0, fmt.Errorf("--%s %q: want a duration such as 90m, 24h or 30d", name, c.String(name))
}

// formatDuration prints a duration without trailing zero units: 24h, not
// 24h0m0s.
func formatDuration(d time.Duration) string {
	s := d.String()
	if t, ok := strings.CutSuffix(s, "m0s"); ok {
		s = t + "m"
	}
	if t, ok := strings.CutSuffix(s, "h0m"); ok {
		s = t + "h"
	}
	return s
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
