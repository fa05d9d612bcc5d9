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

	"inbox/config"
	"inbox/dbaddr"
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

// Opener opens the existing store db (--db) names, as its Access asks. It never
// creates one: a mistyped path is an error, not a new database.
type Opener func(ctx context.Context, db string, a Access) (inbox.Store, error)

// Commands returns the admin commands, which open their stores with open;
// migrate copies a SQLite file with backup before it upgrades it.
func Commands(open Opener, backup FileBackup) []*cli.Command {
	cmds := []*cli.Command{
		listCommand(open),
		statsCommand(open),
		parkedCommand(open),
		showCommand(open),
		reprocessCommand(open),
		replayCommand(open),
		dismissCommand(open),
		redeliverCommand(open, nil),
		alertCommand(open),
		purgeCommand(open),
		pauseCommand(open),
		resumeCommand(open),
		sendCommand(),
		backupCommand(open),
		sourcesCommand(open),
		destinationsCommand(),
		missedCommand(open),
		expectCommand(open),
		expectedCommand(open),
		migrateCommand(open, backup),
	}
	for _, cmd := range cmds {
		connectErrorsWithoutAddress(cmd)
	}
	return cmds
}

// connectErrorsWithoutAddress makes cmd's errors that say a PostgreSQL
// --db could not be reached (the driver's "failed to connect to `user=...
// database=...`", a dial's host:port and address) name none of the
// database's address, as alert's always do: the rest of the text, what
// went wrong, stays.
func connectErrorsWithoutAddress(cmd *cli.Command) {
	action := cmd.Action
	if action == nil {
		return
	}
	cmd.Action = func(c *cli.Context) error {
		err := action(c)
		if err == nil {
			return nil
		}
		db, msg := c.String("db"), err.Error()
		if !dbaddr.IsPostgres(db) || !dbaddr.NamesAddress(msg) {
			return err
		}
		free := dbaddr.Free(err, db)
		var ec cli.ExitCoder
		if errors.As(err, &ec) {
			return cli.Exit(free, ec.ExitCode())
		}
		return errors.New(free)
	}
}

// The flags are built per command: urfave/cli's Apply writes a value from
// the environment into the flag itself, so one shared value would carry
// state from one run to the next.

func jsonFlag() *cli.BoolFlag {
	return &cli.BoolFlag{
		Name:    "json",
		Usage:   "print JSON, one object per line, for scripts",
		EnvVars: []string{"INBOX_JSON"},
	}
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

func busyTimeoutFlag() *cli.GenericFlag {
	return config.BusyTimeoutFlag("how long a write waits for the lock serve or another command holds (500ms, 3s, 1m)")
}

// args returns the command's arguments. A flag after them is refused:
// the flag parser stops at the first argument, so it would be taken for
// one.
//
// A value given to a flag that takes none (--dry-run true) is refused
// too: the parser takes it for the first argument, an id or a name.
func args(c *cli.Context) ([]string, error) {
	for _, a := range c.Args().Slice() {
		if strings.HasPrefix(a, "-") {
			return nil, fmt.Errorf("%s after the arguments (%s): flags go before them", a, c.Command.ArgsUsage)
		}
	}
	if first := strings.ToLower(c.Args().First()); first == "true" || first == "false" {
		for _, f := range c.Command.Flags {
			if b, ok := f.(*cli.BoolFlag); ok && c.IsSet(b.Name) {
				return nil, fmt.Errorf("%q after a flag that takes no value (such as --%s) is not its value but the first argument (%s): write --%s or --%s=false", c.Args().First(), b.Name, c.Command.ArgsUsage, b.Name, b.Name)
			}
		}
	}
	return c.Args().Slice(), nil
}

// idArgs returns the command's arguments (see args), row ids or job ids,
// refusing one that holds the ellipsis a table shortens a long id with:
// such an id is none that any row has, and it must not be looked for,
// replayed or expected as though it were.
func idArgs(c *cli.Context) ([]string, error) {
	ids, err := args(c)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		if strings.Contains(id, cutMark) {
			return nil, fmt.Errorf("%q is an id shortened to fit a table (the %s stands for what was cut): inbox list --wide, or --json, prints it whole", id, cutMark)
		}
	}
	return ids, nil
}

// openRead opens the store named by --db for reading; it never creates
// one.
func openRead(c *cli.Context, open Opener) (inbox.Store, error) {
	return open(c.Context, c.String("db"), Access{BusyTimeout: inbox.DefaultBusyTimeout})
}

// openWrite opens the store named by --db for writing; it never creates
// one, and its writes wait up to --busy-timeout for another process's lock.
func openWrite(c *cli.Context, open Opener) (inbox.Store, error) {
	return open(c.Context, c.String("db"), Access{Write: true, BusyTimeout: config.DurationOf(c, "busy-timeout").Get()})
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
// printJSONLines), else as a table, head first, each cell through
// printedCell, so no stored text can drive the terminal or widen the table
// without bound, the id and key columns (wholeColumns) escaped but never
// cut but to fit, and each block fitted within tableWidth unless --wide
// (see fit). Its written counts the values written out so far.
type rowPrinter[T any] struct {
	c       *cli.Context
	w       *bufio.Writer
	tw      *tabwriter.Writer // nil with --json
	head    tableRow
	ids     []bool // which columns hold ids
	rows    []tableRow
	headed  bool // the head is written
	cells   func(T) []string
	pending int
	written int
}

func newRowPrinter[T any](c *cli.Context, head string, cells func(T) []string) *rowPrinter[T] {
	p := &rowPrinter[T]{c: c, cells: cells, w: bufio.NewWriterSize(c.App.Writer, 64<<10)}
	if !c.Bool("json") {
		p.tw = tabwriter.NewWriter(p.w, 0, 0, 2, ' ', 0)
		for _, name := range strings.Split(head, "\t") {
			p.head = append(p.head, printedCell(name, true))
			p.ids = append(p.ids, wholeColumns[name])
		}
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

// table holds v's cells for the table's next block.
func (p *rowPrinter[T]) table(v T) {
	var row tableRow
	for i, s := range p.cells(v) {
		row = append(row, printedCell(s, i < len(p.ids) && p.ids[i]))
	}
	p.rows = append(p.rows, row)
}

// flush writes out the rows held.
func (p *rowPrinter[T]) flush() error {
	var err error
	if p.tw != nil {
		if !p.c.Bool("wide") {
			fit(p.head, p.rows, p.ids)
		}
		if !p.headed {
			fmt.Fprintln(p.tw, tableText(p.head))
			p.headed = true
		}
		for _, row := range p.rows {
			fmt.Fprintln(p.tw, tableText(row))
		}
		p.rows = p.rows[:0]
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

// tableText is row as a tabwriter takes it: its cells joined by tabs.
func tableText(row tableRow) string {
	cells := make([]string, len(row))
	for i, c := range row {
		cells[i] = c.String()
	}
	return strings.Join(cells, "\t")
}

// readTimeoutFlag is --timeout, the bound of a command that reads.
func readTimeoutFlag() *cli.GenericFlag {
	f := config.DurationFlag("timeout", defaultReadTimeout, "give up reading after this long, saying how far it got (30s, 5m, 1h)", "INBOX_QUERY_TIMEOUT", func(d time.Duration) error {
		if d <= 0 {
			return errors.New("want a positive duration such as 30s, 5m or 1h")
		}
		return nil
	})
	// As --help has always shown it, when the flag was a text one.
	f.DefaultText = `"` + defaultReadTimeout.String() + `"`
	return f
}

// defaultReadTimeout is --timeout's default: a million rows are listed in
// seconds.
const defaultReadTimeout = 30 * time.Second

// readContext returns c's context bounded by --timeout.
func readContext(c *cli.Context) (context.Context, context.CancelFunc, error) {
	ctx, cancel := context.WithTimeout(c.Context, config.DurationOf(c, "timeout").Get())
	return ctx, cancel, nil
}

// stopped returns err, a read's, as the line that says it ran out of
// --timeout when ctx, the read's context, did, with how many rows were
// written before.
func stopped(c *cli.Context, ctx context.Context, err error, written int) error {
	if err == nil || !errors.Is(ctx.Err(), context.DeadlineExceeded) || c.Context.Err() != nil {
		return err
	}
	return fmt.Errorf("%s: stopped after %s (--timeout): %s rows written; raise --timeout", c.Command.Name, strings.TrimSpace(config.DurationOf(c, "timeout").String()), thousands(int64(written)))
}

// wholeColumns are the columns that hold a row id or a key, which a table
// prints whole (see idCell) with --wide, and otherwise shortens only to
// fit its width, in the middle, visibly (see fit): show, expect and the
// other commands that take ids refuse a shortened one (see ids).
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
const timeFormat = inbox.TimeFormat

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
	if d, ok := parseAge(s); ok {
		return d, nil
	}
	// As typed, spaces too: the operator must find it in what they wrote.
	return 0, fmt.Errorf("--%s %q: want a duration such as 90m, 24h or 30d", name, c.String(name))
}

// parseAge reads s as a Go duration or a whole number of days (30d), not
// negative; ok is false when it is neither.
func parseAge(s string) (time.Duration, bool) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n >= 0 && n <= 100*365 {
			return time.Duration(n) * 24 * time.Hour, true
		}
	} else if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return d, true
	}
	return 0, false
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
