package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"inbox/bench/internal/inboxmod"
)

// The receivers that need -postgres.
const (
	// nameInboxPG is the real binary on PostgreSQL: serve --db postgres://...
	nameInboxPG = "inbox-pg"
	// nameInboxPGx2 is two replicas of it on one database, the load split
	// across both.
	nameInboxPGx2 = "inbox-pg-x2"
	// nameInboxPGw4 is one replica with four writers (serve --db-writers
	// 4): four batches in flight rather than one.
	nameInboxPGw4 = "inbox-pg-w4"
	// commitEachPG commits every request in a PostgreSQL transaction of its
	// own.
	commitEachPG = "commit-each-pg"
)

// postgresNames lists the receivers -postgres adds, in the default order.
func postgresNames() []string {
	return []string{nameInboxPG, commitEachPG, nameInboxPGx2, nameInboxPGw4}
}

// pgTimeout bounds each statement the bench itself runs on PostgreSQL.
const pgTimeout = 10 * time.Second

// checkPostgresURL accepts a postgres:// or postgresql:// URL, the form
// whose search_path the bench can set per run.
func checkPostgresURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
		// Not the URL itself: it may hold a password.
		return errors.New("-postgres: want a postgres:// or postgresql:// URL with a host")
	}
	return nil
}

// redactURL hides the password of a URL argument (or of a -flag=URL one),
// for the printed command line.
func redactURL(arg string) string {
	if flagName, val, ok := strings.Cut(arg, "="); ok && strings.HasPrefix(flagName, "-") && !strings.Contains(flagName, "/") {
		return flagName + "=" + redactURL(val)
	}
	u, err := url.Parse(arg)
	if err != nil || u.User == nil {
		return arg
	}
	if _, ok := u.User.Password(); !ok {
		return arg
	}
	u.User = url.UserPassword(u.User.Username(), "xxxxx")
	return u.String()
}

// pgSchema is one run's schema on the bench's database.
type pgSchema struct {
	base string // the -postgres URL
	name string
}

// newSchema creates an empty schema for one run.
func newSchema(ctx context.Context, base, runID string) (pgSchema, error) {
	s := pgSchema{base: base, name: "inbox_bench_" + runID}
	if err := pgExec(ctx, base, `CREATE SCHEMA `+s.name); err != nil {
		return pgSchema{}, fmt.Errorf("postgres: create schema %s: %w", s.name, err)
	}
	return s, nil
}

// url is the base URL with the run's schema as its search_path, and its
// name as the application_name, by which serverMeter finds the run's
// backends.
func (s pgSchema) url() string {
	u, _ := url.Parse(s.base) // checked by checkPostgresURL
	q := u.Query()
	q.Set("search_path", s.name)
	q.Set("application_name", s.name)
	u.RawQuery = q.Encode()
	return u.String()
}

// drop removes the schema and every row in it.
func (s pgSchema) drop() {
	ctx, cancel := context.WithTimeout(context.Background(), pgTimeout)
	defer cancel()
	pgExec(ctx, s.base, `DROP SCHEMA IF EXISTS `+s.name+` CASCADE`)
}

// countRows counts the rows in one of the schema's tables.
func (s pgSchema) countRows(ctx context.Context, table string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, pgTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.base)
	if err != nil {
		return 0, fmt.Errorf("postgres: count rows: %w", err)
	}
	defer conn.Close(ctx)
	var n int64
	// The schema and table are this program's, never input.
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+s.name+`.`+table).Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres: count rows in %s.%s: %w", s.name, table, err)
	}
	return n, nil
}

// pgExec runs one statement on a connection of its own.
func pgExec(ctx context.Context, dsn, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, pgTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// describePostgres says which server the PostgreSQL receivers use and how
// it commits: what each of their commits waits for.
func describePostgres(ctx context.Context, dsn string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, pgTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", fmt.Errorf("postgres: connect: %w", err)
	}
	defer conn.Close(ctx)
	var version, syncCommit, fsync, walSync, maxConns string
	for q, dst := range map[string]*string{
		"SHOW server_version": &version, "SHOW synchronous_commit": &syncCommit, "SHOW fsync": &fsync,
		"SHOW wal_sync_method": &walSync, "SHOW max_connections": &maxConns,
	} {
		if err := conn.QueryRow(ctx, q).Scan(dst); err != nil {
			return "", fmt.Errorf("postgres: %s: %w", q, err)
		}
	}
	host := conn.Config().Host
	return fmt.Sprintf("PostgreSQL %s on %s, synchronous_commit=%s, fsync=%s, wal_sync_method=%s, max_connections=%s",
		version, host, syncCommit, fsync, walSync, maxConns), nil
}

// inboxOnPostgres reports whether the inbox module's binary can open a
// PostgreSQL store from --db: whether its main package links inbox/postgres
// (the opener that picks the store from --db). Until it does, inbox-pg and
// inbox-pg-x2 are left out of a run, saying why.
func inboxOnPostgres(ctx context.Context) (bool, error) {
	root, err := inboxmod.Dir(ctx)
	if err != nil {
		return false, err
	}
	cmd := exec.CommandContext(ctx, "go", "list", "-deps", ".")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return false, fmt.Errorf("go list -deps: %w", err)
	}
	return slices.Contains(strings.Split(string(out), "\n"), "inbox/postgres"), nil
}
