package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"

	"inbox/inbox"
	"inbox/postgres"
)

// withParam returns dsn with the query parameter name set to value.
func withParam(dsn, name, value string) string {
	u, _ := url.Parse(dsn)
	q := u.Query()
	q.Set(name, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// newRole creates a login role for the test, with USAGE on dsn's schema
// and grants run as given (%s is the role, %[2]s the schema), and drops it
// when the test ends, before the schema. It returns dsn as that role.
func newRole(t *testing.T, dsn string, grants ...string) string {
	t.Helper()
	base := databaseURL(t)
	b := make([]byte, 4)
	rand.Read(b)
	role := "r_" + hex.EncodeToString(b)
	schema := searchPath(dsn)
	exec(t, base, `CREATE ROLE `+role+` LOGIN`)
	t.Cleanup(func() {
		exec(t, base, `DROP OWNED BY `+role)
		exec(t, base, `DROP ROLE `+role)
	})
	exec(t, base, `GRANT USAGE ON SCHEMA `+schema+` TO `+role)
	for _, g := range grants {
		exec(t, base, strings.NewReplacer("{role}", role, "{schema}", schema).Replace(g))
	}
	u, _ := url.Parse(dsn)
	u.User = url.User(role)
	return u.String()
}

// TestOpenRefusesAsyncCommit: a writable store refuses a connection string
// that asks for COMMIT to return before the commit is durable
// (synchronous_commit off or local), and says why on one line; a read-only
// store, which commits nothing, opens. (A role's or a database's setting
// does not reach the store's sessions: see TestDurableWhateverTheRoleSays.)
func TestOpenRefusesAsyncCommit(t *testing.T) {
	t.Parallel()
	dsn := testURL(t)
	ctx := context.Background()
	mustOpen(t, dsn, postgres.Options{}).Close()
	for name, bad := range map[string]string{
		"options off":   withParam(dsn, "options", "-csynchronous_commit=off"),
		"options local": withParam(dsn, "options", "-csynchronous_commit=local"),
		"param off":     withParam(dsn, "synchronous_commit", "off"),
	} {
		s, err := postgres.Open(ctx, bad, postgres.Options{})
		if err == nil {
			s.Close()
			t.Errorf("%s: opened a writable store", name)
			continue
		}
		msg := err.Error()
		t.Logf("%s: %s", name, msg)
		if !strings.Contains(msg, "synchronous_commit") || !strings.Contains(msg, "204 must mean committed") || strings.Contains(msg, "\n") {
			t.Errorf("%s: error %q, want one line naming synchronous_commit and why", name, msg)
		}
		ro, err := postgres.Open(ctx, bad, postgres.Options{ReadOnly: true})
		if err != nil {
			t.Errorf("%s: read-only open: %v", name, err)
			continue
		}
		ro.Close()
	}
	for _, good := range []string{"on", "remote_write", "remote_apply"} {
		s, err := postgres.Open(ctx, withParam(dsn, "options", "-csynchronous_commit="+good), postgres.Options{})
		if err != nil {
			t.Errorf("synchronous_commit=%s: %v", good, err)
			continue
		}
		s.Close()
	}
}

// TestOpenCurrentSchemaWithoutCreate: once the schema is current, a role
// with SELECT, INSERT, UPDATE and DELETE on its tables and no CREATE on
// the schema opens a writable store and takes deliveries; on a schema
// still to migrate it is refused, saying what failed.
func TestOpenCurrentSchemaWithoutCreate(t *testing.T) {
	t.Parallel()
	dsn := testURL(t)
	ctx := context.Background()
	dml := newRole(t, dsn) // only USAGE so far
	if s, err := postgres.Open(ctx, dml, postgres.Options{}); err == nil {
		s.Close()
		t.Fatal("a role without CREATE migrated an empty schema")
	} else if !strings.Contains(err.Error(), "migrate") {
		t.Errorf("empty schema without CREATE: %v, want the migration's error", err)
	}

	mustOpen(t, dsn, postgres.Options{}).Close()
	role, _ := url.Parse(dml)
	exec(t, databaseURL(t), `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA `+searchPath(dsn)+` TO `+role.User.Username())
	s := mustOpen(t, dml, postgres.Options{})
	if _, err := s.Put(ctx, job("job_1")); err != nil {
		t.Fatalf("put as the role without CREATE: %v", err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Errorf("ping as the role without CREATE: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ro := mustOpen(t, dml, postgres.Options{ReadOnly: true})
	if st, err := ro.Stats(ctx); err != nil || st.ByStatus[inbox.StatusNew] != 1 {
		t.Errorf("stats as the role: %+v, %v; want the one row", st, err)
	}
}
