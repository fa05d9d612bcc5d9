package config

import (
	"flag"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"
)

// RefuseRepeats makes cmd, and every command below it, refuse a flag that
// takes one value given twice with different values (--status done
// --status parked): the flag parser keeps the last and drops the first
// without a word, so the command would select, or do, less than the
// operator wrote. The refusal names the flag and both values, and goes
// through the command's OnUsageError, as any other mistake in its command
// line does. A flag that takes a list (--event of serve, --secret) may
// repeat, and so may a flag given twice with the same value.
func RefuseRepeats(cmd *cli.Command) {
	before := cmd.Before
	cmd.Before = func(c *cli.Context) error {
		if err := Repeated(c); err != nil {
			if c.Command.OnUsageError != nil {
				return c.Command.OnUsageError(c, err, true)
			}
			return err
		}
		if before != nil {
			return before(c)
		}
		return nil
	}
	for _, sub := range cmd.Subcommands {
		RefuseRepeats(sub)
	}
}

// Repeated returns an error naming the first flag of c's command that
// takes one value and was given two different ones on the command line,
// and both values; nil when there is none.
//
// The command line is read again as the flag parser read it (flags up to
// the first argument or --, a bool flag taking no separate value), each
// flag's values recorded rather than the last kept.
func Repeated(c *cli.Context) error {
	raw := commandLine(c)
	if len(raw) == 0 {
		return nil
	}
	set := flag.NewFlagSet(c.Command.Name, flag.ContinueOnError)
	set.SetOutput(io.Discard)
	var order []*record
	for _, f := range c.Command.Flags {
		names := f.Names()
		if len(names) == 0 {
			continue
		}
		r := &record{name: names[0], list: isList(f)}
		_, r.bool = f.(*cli.BoolFlag)
		order = append(order, r)
		for _, n := range names {
			set.Var(r, n, "")
		}
	}
	// The parser has read this command line already: it cannot fail here.
	if set.Parse(raw) != nil {
		return nil
	}
	for _, r := range order {
		if r.list || len(r.values) < 2 {
			continue
		}
		for _, v := range r.values[1:] {
			if v != r.values[0] {
				return fmt.Errorf("--%s given twice, %q and %q: it takes one value, and the second would silently replace the first; give it once, or run %s once per value", r.name, r.values[0], v, c.Command.Name)
			}
		}
	}
	return nil
}

// commandLine returns the arguments c's command was run with: its parent
// ran it with its own arguments, the command's name first.
func commandLine(c *cli.Context) []string {
	lineage := c.Lineage()
	if len(lineage) < 2 || lineage[1] == nil {
		return nil
	}
	args := lineage[1].Args().Slice()
	if len(args) == 0 {
		return nil
	}
	return args[1:]
}

// isList reports whether f takes a list of values, each repeat adding
// one.
func isList(f cli.Flag) bool {
	l, ok := f.(cli.DocGenerationSliceFlag)
	return ok && l.IsSliceFlag()
}

// record is a flag's values as the command line gave them, in order.
type record struct {
	name   string
	bool   bool
	list   bool
	values []string
}

func (r *record) String() string { return "" }

func (r *record) Set(v string) error {
	r.values = append(r.values, v)
	return nil
}

// IsBoolFlag makes the parser read a bool flag as urfave/cli's does: with
// no separate value (--json, --json=false).
func (r *record) IsBoolFlag() bool { return r.bool }
