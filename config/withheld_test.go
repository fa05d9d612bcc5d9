package config

import (
	"slices"
	"testing"
)

// TestDBSecrets: what an --exec command must not see of --db is the URL
// and its password as written and decoded, wherever the URL holds it.
func TestDBSecrets(t *testing.T) {
	for db, want := range map[string][]string{
		"postgres://inbox:hunter%402@db/inbox":                     {"hunter%402", "hunter@2", "postgres://inbox:hunter%402@db/inbox"},
		"postgresql://inbox@db/inbox?sslmode=require&password=pw1": {"pw1", "postgresql://inbox@db/inbox?sslmode=require&password=pw1"},
		"postgres://inbox@db/inbox":                                nil,
		"/var/lib/inbox/inbox.db":                                  nil,
		"postgres://inbox@db/inbox?sslpassword=kp1":                {"kp1", "postgres://inbox@db/inbox?sslpassword=kp1"},
	} {
		if got := dbSecrets(db, func(string) string { return "" }); !slices.Equal(got, want) {
			t.Errorf("dbSecrets(%q) = %q, want %q", db, got, want)
		}
	}
	env := map[string]string{"PGPASSWORD": "pw2", "PGSSLPASSWORD": "kp2", "PGUSER": "inbox"}
	if got, want := dbSecrets("postgres://db/inbox", func(k string) string { return env[k] }), []string{"pw2", "kp2"}; !slices.Equal(got, want) {
		t.Errorf("dbSecrets with PGPASSWORD and PGSSLPASSWORD set = %q, want %q", got, want)
	}
	if got := dbSecrets("/var/lib/inbox/inbox.db", func(k string) string { return env[k] }); got != nil {
		t.Errorf("dbSecrets of a SQLite path with PGPASSWORD set = %q, want nothing", got)
	}
}
