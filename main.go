// Command inbox receives signed webhooks, stores each job once (in SQLite
// or PostgreSQL, see stores), parks what it can never process, and gives
// operators the commands to look after it. This package only wires: the
// commands, their flags and help, and the logger; serve and dispatch are
// run by package process from the Config their flags make.
package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"inbox/admin"
	"inbox/config"
)

func main() {
	if err := newApp(os.Stdout, os.Stderr).RunContext(signalContext(), os.Args); err != nil {
		// An exit error with no message (alert's exit 1) has said all it has
		// to say on stdout already.
		if msg := err.Error(); msg != "" {
			fmt.Fprintln(os.Stderr, "inbox:", msg)
		}
		var ec cli.ExitCoder
		if errors.As(err, &ec) {
			os.Exit(ec.ExitCode())
		}
		os.Exit(1)
	}
}

// newApp builds the command-line application writing to stdout and stderr.
func newApp(stdout, stderr io.Writer) *cli.App {
	usageError := func(c *cli.Context, err error, _ bool) error {
		return fmt.Errorf("%w (see --help)", err)
	}
	commands := append([]*cli.Command{serveCommand(stderr), dispatchCommand(stderr)}, admin.Commands(adminOpener, backupFile)...)
	commands = append(commands, admin.SecretCommand(), admin.RestoreCommand(checkRestored))
	for _, c := range commands {
		// A command with its own (alert, whose exit codes cron reads) keeps it.
		if c.OnUsageError == nil {
			c.OnUsageError = usageError
		}
		config.RefuseRepeats(c)
		config.Checked(c)
	}
	return &cli.App{
		Name:  "inbox",
		Usage: "a webhook inbox: verify, store each job once, park poison, answer",
		Description: `Examples:
   SUME_COM_WEBHOOK_SIGNING_SECRET=... inbox serve --db /var/lib/inbox/inbox.db
   inbox list --status parked
   inbox stats --json
   inbox --check alert --max-age 24h --notify https://hooks.slack.com/services/...
   inbox backup --db /var/lib/inbox/inbox.db /var/lib/inbox/backup/inbox-$(date +%F).db`,
		Version:              version(),
		Writer:               stdout,
		ErrWriter:            stderr,
		EnableBashCompletion: false,
		// Without a command: the help; with a word that is none, an error
		// (cli's own would print "No help topic" and exit 3).
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return fmt.Errorf("unknown command %q (see inbox --help)", c.Args().First())
			}
			return cli.ShowAppHelp(c)
		},
		Flags:  []cli.Flag{config.CheckFlag()},
		Before: config.StartCheck,
		// Errors are printed once, by main, as one line.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError:   usageError,
		Commands:       commands,
	}
}

// versionFile is this source's version, the VERSION file at the root,
// raised at each release.
//
//go:embed VERSION
var versionFile string

// commit is the commit the binary was built from, when the build says so:
// go build -ldflags "-X main.commit=$(git rev-parse HEAD)". The linker
// sets it; nothing else writes it.
var commit string

// version describes this build: the VERSION file's version, and the
// commit: -ldflags' main.commit, or else the one the Go toolchain
// recorded from a checkout (with its time, and whether the tree was
// modified); "commit unknown" when neither says (a build with
// -buildvcs=false and no -ldflags, or outside a checkout).
func version() string {
	v := strings.TrimSpace(versionFile)
	if commit != "" {
		return v + " (commit " + commit + ")"
	}
	settings := map[string]string{}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
	}
	rev := settings["vcs.revision"]
	if rev == "" {
		return v + " (commit unknown)"
	}
	v += " (commit " + rev[:min(len(rev), 12)]
	if t := settings["vcs.time"]; t != "" {
		v += ", " + t
	}
	if settings["vcs.modified"] == "true" {
		v += ", modified"
	}
	return v + ")"
}

// signalContext returns a context that the first SIGINT or SIGTERM cancels.
// From then on the signals have their default action, so a second one ends
// the process at once. The default is restored before the context is
// cancelled: whatever the cancellation starts (serve's "shutting down"), a
// second signal already kills.
func signalContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sigs
		signal.Reset(syscall.SIGINT, syscall.SIGTERM)
		cancel()
	}()
	return ctx
}
