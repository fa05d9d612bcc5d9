package main

import (
	"context"
	"errors"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"inbox/config"
	"inbox/replicaclient"
	"inbox/sqlite"
	"inbox/stores"
)

// parseReplica reads the replica flags, with [replica] of --config under
// them, into the replica serve runs, its client made from the URL; a zero
// URL when none is named. It refuses a replica on PostgreSQL, and a URL
// replicaclient refuses.
func parseReplica(c *cli.Context, db string, log zerolog.Logger) (config.Replica, error) {
	r, err := config.ReplicaOf(c)
	if err != nil || r.URL == "" {
		return r, err
	}
	if stores.IsPostgres(db) {
		return config.Replica{}, errors.New("--replica applies to a SQLite file only: PostgreSQL keeps its copies with its own replication and backups (see docs/postgres.md)")
	}
	client, err := replicaclient.New(c.Context, r.URL)
	if err != nil {
		return config.Replica{}, err
	}
	r.Config.Client, r.Config.Shown, r.Config.Log = client, replicaclient.Redact(r.URL), log
	return r, nil
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
