package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"inbox/admin"
	"inbox/inbox"
	"inbox/stores"
)

// TestOpenStorePath opens a SQLite file through the opener every command
// uses: created by serve, refused to the commands when it is not there.
func TestOpenStorePath(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "inbox.db")
	if _, err := adminOpener(ctx, db, admin.Access{}); err == nil {
		t.Fatal("a command opened a database that is not there")
	}
	if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a command made %s: %v", db, err)
	}
	s, err := stores.Open(ctx, db, stores.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, inbox.Classify("", inbox.Named{}, []byte(`{"event":"webhook.test"}`), 1, inbox.Rules{})); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := adminOpener(ctx, db, admin.Access{})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if n, err := ro.Count(ctx, inbox.Filter{}); err != nil || n != 1 {
		t.Errorf("count %d, %v; want the row serve stored", n, err)
	}
	if _, ok := ro.(admin.Backuper); !ok {
		t.Error("the SQLite store does not back up")
	}
}

// TestOpenStorePostgres checks that a PostgreSQL URL is taken for
// PostgreSQL, never for a file path, and that a failure to open it is one
// line without the URL's password.
func TestOpenStorePostgres(t *testing.T) {
	for _, db := range []string{"postgres://inbox:hunter2@127.0.0.1:1/inbox", "postgresql://inbox:hunter2@127.0.0.1:1/inbox?password=hunter2"} {
		_, err := stores.Open(context.Background(), db, stores.Options{})
		if err == nil {
			t.Fatalf("%s: opened a server that is not there", db)
		}
		if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "\n") {
			t.Errorf("error %q: holds the password or several lines", err)
		}
		if !strings.Contains(err.Error(), "127.0.0.1:1") {
			t.Errorf("error %q: not PostgreSQL's connection error", err)
		}
		if _, err := os.Stat(db); err == nil {
			t.Errorf("a file %s was made", db)
		}
	}
	// Logs name a PostgreSQL store by its kind only: no address, user or
	// password, whatever form the URL has.
	for db, want := range map[string]string{
		"postgres://inbox:hunter2@db.internal:5432/inbox?sslmode=require&password=x": "postgres",
		"/var/lib/inbox/inbox.db": "/var/lib/inbox/inbox.db",
		"postgres://inbox:hunter2@db1:5432,db2:5432/inbox?target_session_attrs=read-write": "postgres",
		"postgresql://inbox:hun%zzter2@db.internal/inbox":                                  "postgres",
	} {
		if got := stores.Describe(db); got != want {
			t.Errorf("stores.Describe(%q) = %q, want %q", db, got, want)
		}
	}
}

// TestOpenStoreKeywordValue: a PostgreSQL connection string in libpq's
// keyword=value form is refused by the opener every command uses, with an
// error that does not repeat it, and makes no file; a path that merely
// holds "=" is still a SQLite file.
func TestOpenStoreKeywordValue(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, db := range []string{
		"host=127.0.0.1 port=5432 dbname=test user=postgres password=hunter2 sslmode=disable",
		"password=hunter2",
		"  dbname = test password='hun ter2'",
		"sslmode=require\thost=db password=hunter2",
	} {
		for _, o := range []stores.Options{{Schema: schema}, {ReadOnly: true, MustExist: true}} {
			_, err := stores.Open(context.Background(), db, o)
			if err == nil {
				t.Fatalf("%q: opened", db)
			}
			if strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "postgres:// URL") {
				t.Errorf("%q: error %q", db, err)
			}
		}
	}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) > 0 {
		t.Errorf("the refused strings made %d files, the first %q", len(entries), entries[0].Name())
	}
	for _, db := range []string{"a=b.db", "data/host=1.db", "inbox-user=x.db"} {
		s, err := stores.Open(context.Background(), db, stores.Options{Schema: schema})
		if err != nil && strings.Contains(err.Error(), "keyword=value") {
			t.Errorf("%q: refused as a connection string", db)
		}
		if err == nil {
			s.Close()
		}
	}
}
