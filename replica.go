package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"inbox/config"
	"inbox/replica"
	"inbox/replicaclient"
	"inbox/sqlite"
	"inbox/stores"
)

// replicaFlags are serve's flags for the replica of its SQLite file.
func replicaFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "replica", Usage: "SQLite only: copy the database off this machine as it is written, to this URL (file:///mnt/backup/inbox, s3://bucket/path, sftp://user@host/path, nats://host/bucket; credentials from the environment only, see docs/operating.md); [replica] url in --config", EnvVars: []string{"INBOX_REPLICA"}},
		&cli.BoolFlag{Name: "replica-sync", Usage: "answer a delivery 204 only once its commit has reached the replica too (the promise survives the loss of this machine); a replica that cannot be reached then means 503 with Retry-After, and /readyz fails", EnvVars: []string{"INBOX_REPLICA_SYNC"}},
		config.DurationFlag("replica-retention", replica.DefaultRetention, "how far back the replica's history goes (inbox restore --timestamp)", "INBOX_REPLICA_RETENTION", config.Positive),
		config.DurationFlag("replica-snapshot-interval", replica.DefaultSnapshotInterval, "how often a full snapshot is written to the replica (at most --replica-retention): a restore reads the last one and what came after", "INBOX_REPLICA_SNAPSHOT_INTERVAL", config.Positive),
		&cli.BoolFlag{Name: "restore-if-missing", Usage: "with --replica: when the database file is missing (a new machine), restore it from the replica before starting; an empty replica starts an empty inbox", EnvVars: []string{"INBOX_RESTORE_IF_MISSING"}},
	}
}

// replicaSettings is what serve's replica flags, and [replica] of
// --config, say.
type replicaSettings struct {
	url              string
	cfg              replica.Config
	restoreIfMissing bool
}

// parseReplica reads the replica flags, with [replica] of --config under
// them; nil when no replica is named. It refuses them on PostgreSQL and
// without a replica URL, and a URL replicaclient refuses.
func parseReplica(c *cli.Context, db string, log zerolog.Logger) (*replicaSettings, error) {
	var file config.FileReplica
	if path := c.String("config"); path != "" {
		fr, err := config.ReadReplica(path)
		if err != nil {
			return nil, err
		}
		if fr != nil {
			file = *fr
		}
	}
	s := &replicaSettings{url: file.URL, restoreIfMissing: file.RestoreIfMissing}
	s.cfg.Sync = file.Sync
	s.cfg.Retention, _ = time.ParseDuration(file.Retention)
	s.cfg.SnapshotInterval, _ = time.ParseDuration(file.SnapshotInterval)
	if c.IsSet("replica") {
		s.url = c.String("replica")
	}
	if c.IsSet("replica-sync") {
		s.cfg.Sync = c.Bool("replica-sync")
	}
	if c.IsSet("restore-if-missing") {
		s.restoreIfMissing = c.Bool("restore-if-missing")
	}
	if c.IsSet("replica-retention") || s.cfg.Retention == 0 {
		s.cfg.Retention = config.DurationOf(c, "replica-retention").Get()
	}
	if c.IsSet("replica-snapshot-interval") {
		s.cfg.SnapshotInterval = config.DurationOf(c, "replica-snapshot-interval").Get()
	} else if s.cfg.SnapshotInterval == 0 {
		s.cfg.SnapshotInterval = min(config.DurationOf(c, "replica-snapshot-interval").Get(), s.cfg.Retention)
	}
	if s.url == "" {
		for _, name := range []string{"replica-sync", "restore-if-missing", "replica-retention", "replica-snapshot-interval"} {
			if c.IsSet(name) {
				return nil, fmt.Errorf("--%s needs a replica: give --replica URL (or [replica] url in --config)", name)
			}
		}
		return nil, nil
	}
	if stores.IsPostgres(db) {
		return nil, errors.New("--replica applies to a SQLite file only: PostgreSQL keeps its copies with its own replication and backups (see docs/postgres.md)")
	}
	if err := s.cfg.Check(); err != nil {
		return nil, fmt.Errorf("--replica-snapshot-interval and --replica-retention: %w", err)
	}
	client, err := replicaclient.New(c.Context, s.url)
	if err != nil {
		return nil, err
	}
	s.cfg.Client, s.cfg.Shown, s.cfg.Log = client, replicaclient.Redact(s.url), log
	return s, nil
}

// restoreIfMissing restores the database at db from the replica when
// there is no file there (serve --restore-if-missing, on a new machine).
// An empty replica is no error: serve then starts an empty inbox.
//
// Without --restore-if-missing it refuses to start an empty database over
// a replica that holds one: the empty file would become the replica's
// latest state.
func restoreIfMissing(ctx context.Context, db string, s *replicaSettings, log zerolog.Logger) error {
	if s == nil {
		return nil
	}
	if _, err := os.Lstat(db); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("--restore-if-missing: %w", err)
	}
	if !s.restoreIfMissing {
		holds, err := replica.Holds(ctx, s.cfg)
		if err != nil {
			return fmt.Errorf("no database at %s, and the replica cannot be read to check it holds none: %w", db, err)
		}
		if holds {
			return fmt.Errorf("no database at %s, but replica %s holds one: add --restore-if-missing to restore it first (or run inbox restore), or give --replica an empty place to start a new inbox", db, s.cfg.Shown)
		}
		return nil
	}
	err := replica.Restore(ctx, s.cfg, db, time.Time{}, checkRestored)
	if errors.Is(err, replica.ErrEmpty) {
		log.Info().Str("db", db).Str("replica", s.cfg.Shown).Msg("no database at --db and none on the replica: starting an empty inbox")
		return nil
	}
	if err != nil {
		return fmt.Errorf("--restore-if-missing: %w", err)
	}
	log.Info().Str("db", db).Str("replica", s.cfg.Shown).Msg("no database at --db: restored it from the replica")
	return nil
}

// checkRestored is inbox's own check of a restored database: it opens as
// the commands that only read open one, which fails on a file that is not
// an inbox database or lacks a table or column this inbox reads.
func checkRestored(ctx context.Context, path string) error {
	s, err := sqlite.Open(ctx, path, sqlite.Options{Schema: schema, ReadOnly: true, MustExist: true})
	if err != nil {
		if errors.Is(err, sqlite.ErrUpgrade) {
			// An older inbox's database: serve upgrades it as it starts.
			return nil
		}
		return err
	}
	return s.Close()
}

func restoreCommand() *cli.Command {
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
			if err := work(c.Context); err != nil {
				return err
			}
			cfg := replica.Config{Client: client, Shown: replicaclient.Redact(c.String("replica"))}
			to := c.String("to")
			if err := replica.Restore(c.Context, cfg, to, at, checkRestored); err != nil {
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
