package config

import (
	"context"
	"errors"
	"io"
	"sync/atomic"

	"github.com/urfave/cli/v2"
)

// CheckFlag is the app's --check: a command line read, its flags,
// arguments, environment and --config checked as the command checks them,
// and the command stopped before its first work. A cron line or a unit's
// ExecStart can be tried this way before it runs for real.
func CheckFlag() *cli.BoolFlag {
	return &cli.BoolFlag{Name: "check", Usage: "check the command's flags, arguments and --config, then stop before it opens the database, listens or sends anything; exit 0 when it would run (inbox --check alert --max-age 24h)"}
}

// checkKey is the context key of a --check run's *checkRun.
type checkKey struct{}

// checkRun is what a --check run knows: whether the command reached its
// work.
type checkRun struct{ reached atomic.Bool }

// StartCheck, the app's Before, makes a --check run: the commands run on
// a context cancelled at once, so whatever they send or read over the
// network stops before it starts, holding what records how far they got,
// and print nothing on stdout.
func StartCheck(c *cli.Context) error {
	if !c.Bool("check") {
		return nil
	}
	ctx, cancel := context.WithCancel(context.WithValue(c.Context, checkKey{}, &checkRun{}))
	cancel()
	c.Context = ctx
	c.App.Writer = io.Discard
	return nil
}

// Work is what a command calls before its work (opening the store,
// serving): ctx's error, which is that of a --check run, recorded as
// reached.
func Work(ctx context.Context) error {
	if r, ok := ctx.Value(checkKey{}).(*checkRun); ok {
		r.reached.Store(true)
	}
	return ctx.Err()
}

// Checked makes cmd's action, in a --check run, succeed once the command
// got as far as its work: it called work, or something it did stopped on
// the cancelled context. Any other error is the command's refusal of its
// command line.
func Checked(cmd *cli.Command) {
	action := cmd.Action
	if action == nil {
		return
	}
	cmd.Action = func(c *cli.Context) error {
		err := action(c)
		r, ok := c.Context.Value(checkKey{}).(*checkRun)
		if ok && err != nil && (r.reached.Load() || errors.Is(err, context.Canceled)) {
			return nil
		}
		return err
	}
}
