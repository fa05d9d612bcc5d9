package admin

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"inbox/config"
)

func pauseCommand(open Opener) *cli.Command {
	return pausing(open, true, "pause", "stop handing rows to a destination, on every running dispatcher", `Pauses the destination DESTINATION (a [[destination]] name of --config, or
default, the one the --forward-url, --exec or --nats-url flags configure)
for every dispatcher on the database, within about a second, without a
restart: none claims its rows, the rows it holds unstarted are given back,
and its rows wait with no attempt counted, so none uses up its retries.
Attempts already under way finish. The other destinations go on. The pause
is kept in the database, so replicas agree and it outlives restarts, until
inbox resume. inbox stats shows the paused destinations, and /readyz a
line "destination NAME: paused by an operator".

A name the inbox does not know is refused, writing nothing, with the names
it knows: those rows were routed to, the paused ones, and those of a
running dispatcher (serve or dispatch with destinations). To pause a
destination before its first row, with no dispatcher running it yet,
give the config that has it: --config FILE (INBOX_CONFIG; only the
[[destination]] names and filters are read).

Examples:
   inbox pause billing
   inbox pause default
   inbox pause --config /etc/inbox/inbox.toml crm`)
}

func resumeCommand(open Opener) *cli.Command {
	return pausing(open, false, "resume", "hand rows to a paused destination again", `Resumes the destination DESTINATION that inbox pause paused: every
dispatcher on the database claims its rows again within about a second,
oldest due first, their attempts counted from where they stood. Resuming a
destination that is not paused does nothing; a name the inbox does not
know (see inbox pause --help) is refused, writing nothing. Every paused
name is known, so a pause of a misspelt name can be resumed.

Examples:
   inbox resume billing`)
}

// pausing is inbox pause (paused) or inbox resume.
func pausing(open Opener, paused bool, name, usage, description string) *cli.Command {
	return &cli.Command{
		Name:        name,
		Usage:       usage,
		ArgsUsage:   "DESTINATION",
		Description: description,
		Flags: []cli.Flag{config.DBFlag(), config.BusyTimeoutFlag("how long the write waits for serve's lock (500ms, 3s, 1m)"),
			config.FileFlag("a config whose [[destination]] names are known too, though no row has reached them yet (only names and filters are read)")},
		Action: func(c *cli.Context) error {
			a, err := args(c)
			if err != nil {
				return err
			}
			if len(a) != 1 {
				return fmt.Errorf("%s takes one destination name (see --help)", name)
			}
			dest := a[0]
			if !config.ValidName(dest) {
				return errors.New("a destination name is 1 to 32 of a-z, 0-9, - and _")
			}
			store, err := openWrite(c, open)
			if err != nil {
				return err
			}
			defer store.Close()
			// --config is read only for a name the store does not know:
			// INBOX_CONFIG, set for serve, may name a file this user
			// cannot read.
			if err := knownDestination(c.Context, store, dest, nil); err != nil {
				file := c.String("config")
				if file == "" {
					return err
				}
				configured, lerr := config.LoadRoutes(file)
				if lerr != nil {
					return lerr
				}
				if err := knownDestination(c.Context, store, dest, configured); err != nil {
					return err
				}
			}
			if err := store.SetPaused(c.Context, dest, paused); err != nil {
				return err
			}
			if paused {
				fmt.Fprintf(c.App.Writer, "paused %s: its rows wait, no attempt counted, until inbox resume %s\n", dest, dest)
			} else {
				fmt.Fprintf(c.App.Writer, "resumed %s\n", dest)
			}
			return store.Close()
		},
	}
}
