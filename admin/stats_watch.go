package admin

import (
	"inbox/config"

	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

// Watch limits: redrawing faster than a person reads only loads the
// store, and each read is cut off after the interval or minWatchRead,
// whichever is longer, so a store that hangs does not freeze the screen
// for good.
const (
	defaultWatch = 2 * time.Second
	minWatch     = 100 * time.Millisecond
	minWatchRead = 5 * time.Second
)

// watchFlag is --watch, whose interval is the one argument that may
// follow it.
func watchFlag() *cli.BoolFlag {
	return &cli.BoolFlag{Name: "watch", Usage: "redraw every INTERVAL (the argument after it; default 2s) until interrupted"}
}

// noArgsButWatch is NoArgs, but for the interval --watch may take and
// the flags after it, which watched has read.
func noArgsButWatch(c *cli.Context) error {
	if c.Bool("watch") {
		return nil
	}
	return config.NoArgs(c)
}

// flagsAfterInterval reads the flags that follow --watch's interval into
// c: the flag parser stops at the interval, an argument, and leaves
// whatever follows as arguments, so "--watch 2s --json" would lose its
// --json. Anything left that is no flag is refused.
func flagsAfterInterval(c *cli.Context, rest []string) error {
	set := flag.NewFlagSet(c.Command.Name, flag.ContinueOnError)
	set.SetOutput(io.Discard)
	for _, f := range c.Command.Flags {
		if err := f.Apply(set); err != nil {
			return err
		}
	}
	if err := set.Parse(rest); err != nil {
		return fmt.Errorf("after --watch %s: %w (see --help)", c.Args().First(), err)
	}
	if set.NArg() > 0 {
		return fmt.Errorf("%s takes no arguments but --watch's interval, got %q after --watch %s", c.Command.Name, set.Arg(0), c.Args().First())
	}
	var err error
	set.Visit(func(f *flag.Flag) {
		if err == nil {
			err = c.Set(f.Name, f.Value.String())
		}
	})
	return err
}

// watched returns cmd with --watch: its action run again every interval,
// each output drawn as a frame (the screen cleared first on a terminal;
// with --json, a line each), until SIGINT or SIGTERM, which ends it with
// exit 0. A frame that cannot be read fails the command when it is the
// first, and is drawn as the error otherwise.
func watched(cmd *cli.Command) *cli.Command {
	once := cmd.Action
	cmd.Action = func(c *cli.Context) error {
		if !c.Bool("watch") {
			return once(c)
		}
		every := defaultWatch
		if arg := c.Args().First(); strings.HasPrefix(arg, "-") {
			return config.NoArgs(c)
		}
		if c.Args().Len() > 1 {
			if err := flagsAfterInterval(c, c.Args().Tail()); err != nil {
				return err
			}
		}
		if arg := c.Args().First(); arg != "" {
			d, err := time.ParseDuration(arg)
			if err != nil || d < minWatch {
				return fmt.Errorf("--watch %q: want an interval of at least %s, such as 2s or 1m", arg, minWatch)
			}
			every = d
		}
		return watch(c, every, once)
	}
	return cmd
}

func watch(c *cli.Context, every time.Duration, once cli.ActionFunc) error {
	ctx, w := c.Context, c.App.Writer
	clear := !c.Bool("json") && terminal(w)
	defer func() { c.Context, c.App.Writer = ctx, w }()
	for n := 0; ; n++ {
		var frame bytes.Buffer
		fctx, cancel := context.WithTimeout(ctx, max(every, minWatchRead))
		c.Context, c.App.Writer = fctx, &frame
		err := once(c)
		c.Context, c.App.Writer = ctx, w
		cancel()
		if ctx.Err() != nil {
			return nil // interrupted
		}
		if err != nil {
			if n == 0 {
				return err
			}
			frame.Reset()
			fmt.Fprintf(&frame, "cannot read: %v\n", err)
		}
		var out bytes.Buffer
		if clear {
			out.WriteString("\x1b[H\x1b[2J")
		}
		if !c.Bool("json") {
			fmt.Fprintf(&out, "inbox stats, every %s, at %s (Ctrl-C to stop)\n\n", formatDuration(every), time.Now().Format(time.TimeOnly))
		}
		out.Write(frame.Bytes())
		if _, err := w.Write(out.Bytes()); err != nil {
			if errors.Is(err, os.ErrClosed) {
				return nil
			}
			return err
		}
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// terminal reports whether w is a terminal.
func terminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
