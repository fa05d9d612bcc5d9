package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/config"
	"inbox/replica"
	"inbox/replicaclient"
)

// RestoreCommand is inbox restore: the database a replica holds written to
// a new file, checked by check (inbox's own schema check) as well as by
// PRAGMA integrity_check.
func RestoreCommand(check func(ctx context.Context, path string) error) *cli.Command {
	return &cli.Command{
		Name:  "restore",
		Usage: "write the database a replica holds (serve --replica) to a new file",
		Description: `Restores the SQLite database serve --replica copied to URL, as of its last
sync or, with --timestamp, as it was then (as far back as the replica's
retention), into FILE, which must not exist: restore never replaces a
file. The copy is written beside FILE under a temporary name, checked with
PRAGMA integrity_check and with inbox's own schema check, and only then
given its name. Credentials come from the environment, as for serve.
Then start serve with --db FILE (and --replica URL to go on replicating).
serve --replica URL --restore-if-missing does the same by itself when the
database file is missing.

Examples:
   inbox restore --replica file:///mnt/backup/inbox --to /var/lib/inbox/inbox.db
   inbox restore --replica nats://127.0.0.1:4222/inbox-replica --to /var/lib/inbox/inbox.db
   inbox restore --replica file:///mnt/backup/inbox --to /tmp/inbox-morning.db --timestamp 2026-01-02T09:00:00Z`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "replica", Usage: "the replica's URL, as serve --replica was given it (required)", EnvVars: []string{"INBOX_REPLICA"}},
			&cli.StringFlag{Name: "to", Usage: "the file to write; must not exist (required)", EnvVars: []string{"INBOX_RESTORE_TO"}},
			&cli.StringFlag{Name: "timestamp", Usage: "restore the database as it was at this time (RFC 3339, e.g. 2026-01-02T09:00:00Z) rather than the latest", EnvVars: []string{"INBOX_RESTORE_TIMESTAMP"}},
		},
		Action: func(c *cli.Context) error {
			if err := config.NoArgs(c); err != nil {
				return err
			}
			// Checked here, not as urfave/cli's Required, which would come
			// before the refusal of a flag given twice.
			if c.String("replica") == "" || c.String("to") == "" {
				return errors.New("restore needs --replica URL (the replica serve --replica wrote) and --to FILE (a file that does not exist)")
			}
			var at time.Time
			if ts := c.String("timestamp"); ts != "" {
				var err error
				if at, err = time.Parse(time.RFC3339, ts); err != nil {
					return fmt.Errorf("--timestamp %q: want a time such as 2026-01-02T09:00:00Z (RFC 3339)", ts)
				}
			}
			client, err := replicaclient.New(c.Context, c.String("replica"))
			if err != nil {
				return err
			}
			if err := config.Work(c.Context); err != nil {
				return err
			}
			cfg := replica.Config{Client: client, Shown: replicaclient.Redact(c.String("replica"))}
			to := c.String("to")
			if err := replica.Restore(c.Context, cfg, to, at, check); err != nil {
				if errors.Is(err, replica.ErrEmpty) {
					return fmt.Errorf("%w: check the URL (and that serve ran with --replica %s)", err, cfg.Shown)
				}
				return err
			}
			fmt.Fprintf(c.App.Writer, "restored %s from %s\n", to, cfg.Shown)
			return nil
		},
	}
}
