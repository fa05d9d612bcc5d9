package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"inbox/postgres"
)

// testURL returns the URL of a new, empty schema of the test database,
// dropped when the test ends. The database is INBOX_TEST_DATABASE_URL;
// without it the test skips, unless INBOX_REQUIRE_POSTGRES=1, when it fails.
func testURL(tb testing.TB) string {
	tb.Helper()
	base := databaseURL(tb)
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		tb.Fatal("INBOX_TEST_DATABASE_URL is not a postgres:// URL")
	}
	b := make([]byte, 6)
	rand.Read(b)
	schema := "t_" + hex.EncodeToString(b)
	exec(tb, base, `CREATE SCHEMA `+schema)
	tb.Cleanup(func() { exec(tb, base, `DROP SCHEMA `+schema+` CASCADE`) })
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// migratedURL returns the URL of a new schema as testURL does, with the
// store's tables made by a store opened (with the default busy timeout)
// and closed. A test whose store has a short busy timeout opens on it:
// Open's bound takes in the migration, which a busy server may not finish
// within a short one.
func migratedURL(tb testing.TB) string {
	tb.Helper()
	dsn := testURL(tb)
	if err := mustOpen(tb, dsn, postgres.Options{}).Close(); err != nil {
		tb.Fatalf("close the store that migrated: %v", err)
	}
	return dsn
}

// databaseURL returns INBOX_TEST_DATABASE_URL, or skips the test (fails it
// with INBOX_REQUIRE_POSTGRES=1) when it is not set.
func databaseURL(tb testing.TB) string {
	tb.Helper()
	base := os.Getenv("INBOX_TEST_DATABASE_URL")
	if base == "" {
		if os.Getenv("INBOX_REQUIRE_POSTGRES") == "1" {
			tb.Fatal("INBOX_REQUIRE_POSTGRES=1 but INBOX_TEST_DATABASE_URL is not set")
		}
		tb.Skip("no PostgreSQL: run with INBOX_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	}
	return base
}

// exec runs one statement on a connection of its own.
func exec(tb testing.TB, dsn, sql string, args ...any) {
	tb.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatalf("connect to the test database: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
}

// mustOpen opens a store at dsn and closes it when the test ends.
func mustOpen(tb testing.TB, dsn string, opts postgres.Options) *postgres.Store {
	tb.Helper()
	s, err := postgres.Open(context.Background(), dsn, opts)
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}
