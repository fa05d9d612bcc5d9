package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/replica"
)

// FileReplica is the [replica] table of the configuration file: where
// serve replicates its SQLite file (see the --replica flags, which take
// precedence). Durations are written as Go durations ("72h", "30m").
type FileReplica struct {
	URL              string `toml:"url"`
	Sync             bool   `toml:"sync"`
	Retention        string `toml:"retention"`
	SnapshotInterval string `toml:"snapshot_interval"`
	RestoreIfMissing bool   `toml:"restore_if_missing"`
}

// ReadReplica reads the [replica] table of the configuration file at
// path; nil when it has none. It fails as reading the sources does (an
// unreadable file, an unknown key), and on a duration that does not parse.
func ReadReplica(path string) (*FileReplica, error) {
	fc, err := decodeFile(path)
	if err != nil {
		return nil, err
	}
	r := fc.Replica
	if r == nil {
		return nil, nil
	}
	for key, text := range map[string]string{"retention": r.Retention, "snapshot_interval": r.SnapshotInterval} {
		if text == "" {
			continue
		}
		if d, err := time.ParseDuration(strings.TrimSpace(text)); err != nil || d <= 0 {
			return nil, fmt.Errorf("config %s: [replica] %s = %q: want a positive duration such as 24h or 30m", path, key, text)
		}
	}
	return r, nil
}

// ReplicaFlags are serve's flags for the replica of its SQLite file.
func ReplicaFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "replica", Usage: "SQLite only: copy the database off this machine as it is written, to this URL (file:///mnt/backup/inbox, s3://bucket/path, sftp://user@host/path, nats://host/bucket; credentials from the environment only, see docs/operating.md); [replica] url in --config", EnvVars: []string{"INBOX_REPLICA"}},
		&cli.BoolFlag{Name: "replica-sync", Usage: "answer a delivery 204 only once its commit has reached the replica too (the promise survives the loss of this machine); a replica that cannot be reached then means 503 with Retry-After, and /readyz fails", EnvVars: []string{"INBOX_REPLICA_SYNC"}},
		DurationFlag("replica-retention", replica.DefaultRetention, "how far back the replica's history goes (inbox restore --timestamp)", "INBOX_REPLICA_RETENTION", Positive),
		DurationFlag("replica-snapshot-interval", replica.DefaultSnapshotInterval, "how often a full snapshot is written to the replica (at most --replica-retention): a restore reads the last one and what came after", "INBOX_REPLICA_SNAPSHOT_INTERVAL", Positive),
		&cli.BoolFlag{Name: "restore-if-missing", Usage: "with --replica: when the database file is missing (a new machine), restore it from the replica before starting; an empty replica starts an empty inbox", EnvVars: []string{"INBOX_RESTORE_IF_MISSING"}},
	}
}

// Replica is what serve's replica flags say, over [replica] of --config:
// the URL ("" for none), whether to restore a missing file first, and the
// replica's settings but its client.
type Replica struct {
	URL              string
	RestoreIfMissing bool
	Config           replica.Config
}

// ReplicaOf reads the replica flags of c, with [replica] of --config under
// them. It refuses a replica setting given without a replica URL, and
// settings the replica would refuse.
func ReplicaOf(c *cli.Context) (Replica, error) {
	var file FileReplica
	if path := c.String("config"); path != "" {
		fr, err := ReadReplica(path)
		if err != nil {
			return Replica{}, err
		}
		if fr != nil {
			file = *fr
		}
	}
	r := Replica{URL: file.URL, RestoreIfMissing: file.RestoreIfMissing}
	r.Config.Sync = file.Sync
	r.Config.Retention, _ = time.ParseDuration(file.Retention)
	r.Config.SnapshotInterval, _ = time.ParseDuration(file.SnapshotInterval)
	if c.IsSet("replica") {
		r.URL = c.String("replica")
	}
	if c.IsSet("replica-sync") {
		r.Config.Sync = c.Bool("replica-sync")
	}
	if c.IsSet("restore-if-missing") {
		r.RestoreIfMissing = c.Bool("restore-if-missing")
	}
	if c.IsSet("replica-retention") || r.Config.Retention == 0 {
		r.Config.Retention = DurationOf(c, "replica-retention").Get()
	}
	if c.IsSet("replica-snapshot-interval") {
		r.Config.SnapshotInterval = DurationOf(c, "replica-snapshot-interval").Get()
	} else if r.Config.SnapshotInterval == 0 {
		r.Config.SnapshotInterval = min(DurationOf(c, "replica-snapshot-interval").Get(), r.Config.Retention)
	}
	if r.URL == "" {
		for _, name := range []string{"replica-sync", "restore-if-missing", "replica-retention", "replica-snapshot-interval"} {
			if c.IsSet(name) {
				return Replica{}, fmt.Errorf("--%s needs a replica: give --replica URL (or [replica] url in --config)", name)
			}
		}
		return Replica{}, nil
	}
	if err := r.Config.Check(); err != nil {
		return Replica{}, fmt.Errorf("--replica-snapshot-interval and --replica-retention: %w", err)
	}
	return r, nil
}
