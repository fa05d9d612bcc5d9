// Command inbox receives signed webhooks, stores each job once in SQLite,
// parks what it can never process, and gives operators the commands to look
// after it.
package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"inbox/admin"
	"inbox/inbox"
	"inbox/receiver"
)

//go:embed schema.sql
var schema string

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	go func() {
		// After the first signal, restore the default so a second one ends
		// the process at once.
		<-ctx.Done()
		stop()
	}()
	if err := newApp(os.Stdout, os.Stderr).RunContext(ctx, os.Args); err != nil {
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
	commands := append([]*cli.Command{serveCommand(stderr)}, admin.Commands()...)
	for _, c := range commands {
		c.OnUsageError = usageError
	}
	return &cli.App{
		Name:  "inbox",
		Usage: "a webhook inbox: verify, store each job once, park poison, answer",
		Description: `Examples:
   SUME_COM_WEBHOOK_SIGNING_SECRET=... inbox serve --db /var/lib/inbox/inbox.db
   inbox list --status parked
   inbox stats --json`,
		Writer:               stdout,
		ErrWriter:            stderr,
		HideHelpCommand:      true,
		EnableBashCompletion: false,
		// Errors are printed once, by main, as one line.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError:   usageError,
		Commands:       commands,
	}
}

func serveCommand(logOut io.Writer) *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "receive webhooks",
		Description: `Verifies each delivery's signature, stores it once per job, parks what can
never be processed, and answers 204 only once the row is on disk.

Examples:
   SUME_COM_WEBHOOK_SIGNING_SECRET=whsec_current inbox serve
   SUME_COM_WEBHOOK_SIGNING_SECRET=old,new inbox serve --addr :8080 --db /var/lib/inbox/inbox.db
   inbox serve --event job.completed --event job.failed --max-body 2MiB`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "addr", Value: "127.0.0.1:8080", Usage: "listen address", EnvVars: []string{"INBOX_ADDR"}},
			admin.DBFlag,
			&cli.StringSliceFlag{Name: "secret", Usage: "signing secret; repeat or comma-separate to accept several during a rotation (prefer the environment variable: flags show in ps)", EnvVars: []string{"SUME_COM_WEBHOOK_SIGNING_SECRET"}},
			&cli.DurationFlag{Name: "tolerance", Value: 5 * time.Minute, Usage: "how far the signed timestamp may be from now, either way", EnvVars: []string{"INBOX_TOLERANCE"}},
			admin.EventsFlag(),
			admin.MaxBodyFlag(),
			&cli.StringFlag{Name: "max-request", Value: "4MiB", Usage: "hard cap: larger requests get 413 and are not read", EnvVars: []string{"INBOX_MAX_REQUEST"}},
			&cli.StringFlag{Name: "path", Value: "/webhooks/sume", Usage: "the webhook path", EnvVars: []string{"INBOX_PATH"}},
			&cli.DurationFlag{Name: "busy-timeout", Value: inbox.DefaultBusyTimeout, Usage: "how long a write waits for another process's lock before the answer is 503", EnvVars: []string{"INBOX_BUSY_TIMEOUT"}},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error", EnvVars: []string{"INBOX_LOG_LEVEL"}},
		},
		Action: func(c *cli.Context) error {
			log, err := newLogger(logOut, c.String("log-level"))
			if err != nil {
				return err
			}
			rules, err := admin.Rules(c)
			if err != nil {
				return err
			}
			maxRequest, err := admin.ParseSize(c.String("max-request"))
			if err != nil {
				return fmt.Errorf("--max-request: %w", err)
			}
			secrets, err := admin.SplitList(c.StringSlice("secret"))
			if err != nil {
				return fmt.Errorf("signing secret: %w", err)
			}
			if len(secrets) == 0 {
				return errors.New("no signing secret: set SUME_COM_WEBHOOK_SIGNING_SECRET (or --secret)")
			}
			path := c.String("path")
			if !strings.HasPrefix(path, "/") {
				return fmt.Errorf("--path must start with /, got %q", path)
			}

			store, err := inbox.Open(c.Context, c.String(admin.DBFlag.Name), inbox.Options{
				Schema:      schema,
				BusyTimeout: c.Duration("busy-timeout"),
			})
			if err != nil {
				return err
			}
			defer store.Close()
			h, err := receiver.NewHandler(store, receiver.Config{
				Secrets:   secrets,
				Tolerance: c.Duration("tolerance"),
				Rules:     rules,
				HardCap:   maxRequest,
			}, log)
			if err != nil {
				return err
			}
			mux := http.NewServeMux()
			mux.Handle(path, h)
			ln, err := net.Listen("tcp", c.String("addr"))
			if err != nil {
				return err
			}
			log.Info().Str("db", store.Path()).Str("path", path).Strs("events", rules.Events).Msg("starting")
			if err := receiver.Serve(c.Context, ln, mux, log); err != nil {
				return err
			}
			return store.Close()
		},
	}
}

// newLogger returns a JSON logger, or a readable one when w is a terminal.
func newLogger(w io.Writer, level string) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || level == "" {
		return zerolog.Logger{}, fmt.Errorf("--log-level: unknown level %q", level)
	}
	if f, ok := w.(*os.File); ok {
		if _, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err == nil {
			w = zerolog.ConsoleWriter{Out: f, TimeFormat: time.RFC3339}
		}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}
