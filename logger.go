package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"inbox/dbaddr"
)

// logLevelFlag is --log-level, for the commands that log.
func logLevelFlag() *cli.StringFlag {
	return &cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error", EnvVars: []string{"INBOX_LOG_LEVEL"}}
}

// checkLogLevel refuses a --log-level zerolog does not know.
func checkLogLevel(level string) error {
	if _, err := zerolog.ParseLevel(level); err != nil || level == "" {
		return fmt.Errorf("--log-level: unknown level %q", level)
	}
	return nil
}

// newLogger returns a JSON logger, or a readable one when w is a terminal.
func newLogger(w io.Writer, level string) (zerolog.Logger, error) {
	if err := checkLogLevel(level); err != nil {
		return zerolog.Logger{}, err
	}
	lvl, _ := zerolog.ParseLevel(level)
	if f, ok := w.(*os.File); ok {
		if _, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err == nil {
			w = zerolog.ConsoleWriter{Out: f, TimeFormat: time.RFC3339}
		}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}

// logErrorsWithoutAddress makes every error this process logs free of
// the address of its store db (dbaddr.ForLogs): serve and dispatch have
// one store, and zerolog one error marshaller.
func logErrorsWithoutAddress(db string) {
	free := dbaddr.ForLogs(db)
	zerolog.ErrorMarshalFunc = func(err error) any { return free(err) }
}
