package admin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"inbox/config"
	"inbox/inbox"
	"inbox/scheme"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

// liveVibeSecret is a secret in Vibe's form: vjs_ and the unpadded
// base64url of 32 bytes.
const liveVibeSecret = "vjs_bGl2ZS1saXZlLWxpdmUtbGl2ZS1saXZlLWxpdmUtbGk"

// writeTestFile writes text as a configuration file and returns its path.
func writeTestFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "inbox.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const sourcesConf = `
[[source]]
name = "sume"
scheme = "sume"
[[source.secret]]
env = "TEST_SUME_SECRET"

[[source]]
name = "vibe"
scheme = "vibe"
[[source.secret]]
env = "TEST_VIBE_SECRET"
[[source.secret]]
env = "TEST_VIBE_SECRET_PREVIOUS"
expires = 2020-01-01T00:00:00Z
`

// TestSourcesWithoutSecrets checks that inbox sources runs without every
// secret in the environment: a fingerprint only for a secret it can read,
// "unset" for one it cannot, "expired" for one past its expiry.
func TestSourcesWithoutSecrets(t *testing.T) {
	db := newDB(t)
	t.Setenv("TEST_VIBE_SECRET", liveVibeSecret)
	cfg := writeTestFile(t, sourcesConf)
	out, err := run(t, "sources", "--db", db, "--config", cfg)
	if err != nil {
		t.Fatalf("sources: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("sources:\n%s\nwant a header and three secrets", out)
	}
	// 12046e24: printf %s "$liveVibeSecret" | sha256sum, first 4 bytes.
	want := [][2]string{{"unset", "-"}, {"live", "12046e24"}, {"expired", "-"}}
	for i, w := range want {
		f := strings.Fields(lines[i+1])
		if got := [2]string{f[4], f[5]}; got != w {
			t.Errorf("line %q: state and fingerprint %v, want %v", lines[i+1], got, w)
		}
	}
	if strings.Contains(out, liveVibeSecret) {
		t.Error("sources shows a secret")
	}
}

// TestExpiredSecretMayBeUnset checks that serve's loading accepts an
// expired secret whose variable is unset (it could verify nothing) and
// still refuses a live one.
func TestExpiredSecretMayBeUnset(t *testing.T) {
	t.Parallel()
	env := map[string]string{"TEST_SUME_SECRET": "s", "TEST_VIBE_SECRET": liveVibeSecret}
	srcs, err := config.LoadSources(writeTestFile(t, sourcesConf), func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("expired secret unset: %v", err)
	}
	if n := len(srcs[1].Keys); n != 1 {
		t.Errorf("vibe keys: %d, want 1", n)
	}
	if _, err := config.LoadSources(writeTestFile(t, sourcesConf), func(k string) string { return map[string]string{"TEST_SUME_SECRET": "s"}[k] }); err == nil || !strings.Contains(err.Error(), "TEST_VIBE_SECRET") {
		t.Errorf("live secret unset: err = %v, want it named", err)
	}
}

// TestConfigConflictMessage checks that a flag given with --config is
// refused in a sentence that names the flag, its variable and the file's
// key instead.
func TestConfigConflictMessage(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	cfg := writeTestFile(t, sourcesConf)
	_, err := run(t, "reprocess", "--db", db, "--config", cfg, "--event", "push", "--all")
	want := "--event (or INBOX_EVENTS) conflicts with --config " + cfg + ": the file sets each source's events"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want %q", err, want)
	}
}

// TestNoArgs checks that the commands that take no arguments refuse a
// stray one rather than ignore it.
func TestNoArgs(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	for _, args := range [][]string{
		{"list", "--db", db, "parked"},
		{"parked", "--db", db, "unknown_event"},
		{"stats", "--db", db, "now"},
		{"purge", "--db", db, "--older-than", "30d", "--dry-run", "x"},
		{"send", "--secret", "s", "extra"},
		{"sources", "--db", db, "--config", "x.toml", "extra"},
	} {
		_, err := run(t, args...)
		if err == nil || !strings.Contains(err.Error(), args[0]+" takes no arguments") {
			t.Errorf("%v: err = %v, want takes no arguments", args, err)
		}
	}
}

// TestBackupFlagAfterPath checks that a flag after backup's PATH is named
// as such, not as an id.
func TestBackupFlagAfterPath(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	_, err := run(t, "backup", "--db", db, t.TempDir()+"/copy.db", "--json")
	if err == nil || !strings.Contains(err.Error(), "--json after the arguments (PATH)") {
		t.Errorf("err = %v, want --json after the arguments (PATH)", err)
	}
}

// TestSourcesInvalidSecret shows a secret that is set but not in its
// scheme's form as invalid, not as unset.
func TestSourcesInvalidSecret(t *testing.T) {
	db := newDB(t)
	t.Setenv("TEST_SW_SECRET", "not-whsec")
	cfg := writeTestFile(t, `
[[source]]
name = "sw"
scheme = "standard-webhooks"
[[source.secret]]
env = "TEST_SW_SECRET"
`)
	out, err := run(t, "sources", "--db", db, "--config", cfg)
	if err != nil {
		t.Fatalf("sources: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || strings.Fields(lines[1])[4] != "invalid" {
		t.Fatalf("sources:\n%s\nwant the secret shown invalid", out)
	}
}

// TestSourcesWithoutConfig: without --config, sources lists the one Sume
// source serve runs without it, each secret of
// SUME_COM_WEBHOOK_SIGNING_SECRET as serve splits it, and when each last
// verified a delivery.
func TestSourcesWithoutConfig(t *testing.T) {
	db := newDB(t)
	verified := time.Now().Add(-time.Hour).Truncate(time.Second)
	s := sqlitetest.MustOpenPath(t, db, sqlite.Options{})
	if err := s.RecordSecretUses(t.Context(), []inbox.SecretUse{
		{Source: "sume", Fingerprint: scheme.Secret{Key: []byte("whsec_old")}.Fingerprint(), LastVerified: verified},
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		env   string
		set   bool
		lines [][]string // source, path, scheme, position, state, fingerprint set, last verified
	}{
		{"whsec_new, whsec_old", true, [][]string{{"sume", "/webhooks/sume", "sume", "1", "live", "fp", "-"},
			{"sume", "/webhooks/sume", "sume", "2", "live", "fp", formatTime(verified)}}},
		{"whsec_old", true, [][]string{{"sume", "/webhooks/sume", "sume", "1", "live", "fp", formatTime(verified)}}},
		{"whsec_new,,whsec_old", true, [][]string{{"sume", "/webhooks/sume", "sume", "1", "live", "fp", "-"},
			{"sume", "/webhooks/sume", "sume", "2", "invalid", "-", "-"}, {"sume", "/webhooks/sume", "sume", "3", "live", "fp", formatTime(verified)}}},
		{"", false, [][]string{{"sume", "/webhooks/sume", "sume", "1", "unset", "-", "-"}}},
	} {
		if tt.set {
			t.Setenv("SUME_COM_WEBHOOK_SIGNING_SECRET", tt.env)
		} else {
			os.Unsetenv("SUME_COM_WEBHOOK_SIGNING_SECRET")
		}
		out, err := run(t, "sources", "--db", db)
		if err != nil {
			t.Fatalf("%q: sources: %v", tt.env, err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != len(tt.lines)+1 || !strings.HasPrefix(lines[0], "SOURCE") {
			t.Errorf("%q:\n%s\nwant a header and %d secrets", tt.env, out, len(tt.lines))
			continue
		}
		for i, want := range tt.lines {
			f := strings.Fields(lines[i+1])
			if len(f) != 8 {
				t.Errorf("%q: line %q", tt.env, lines[i+1])
				continue
			}
			if f[5] != "-" && len(f[5]) == 8 {
				f[5] = "fp"
			}
			got := append(f[:6:6], f[7])
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("%q: line %q, want %v", tt.env, lines[i+1], want)
			}
		}
		if strings.Contains(out, "whsec_") {
			t.Errorf("%q: sources shows a secret:\n%s", tt.env, out)
		}
	}
	t.Setenv("SUME_COM_WEBHOOK_SIGNING_SECRET", "whsec_old")
	t.Setenv("INBOX_PATH", "/hooks/sume")
	out, err := run(t, "sources", "--db", db, "--json")
	if err != nil {
		t.Fatal(err)
	}
	rows := jsonLines[SourceSecret](t, out)
	if len(rows) != 1 || rows[0].Path != "/hooks/sume" || !rows[0].LastVerified.Equal(verified) || rows[0].State != "live" {
		t.Errorf("sources --json = %s", out)
	}
}

// TestSourcesUnverified: below the secrets, sources lists each source's
// failed verifications, saying whether a delivery verified since they
// began; nothing of them with --json, or when there are none.
func TestSourcesUnverified(t *testing.T) {
	db := newDB(t)
	t.Setenv("SUME_COM_WEBHOOK_SIGNING_SECRET", "whsec_new")
	out, err := run(t, "sources", "--db", db)
	if err != nil || strings.Contains(out, "FAILED VERIFICATION") {
		t.Fatalf("no failures: %v\n%s", err, out)
	}
	verified := time.Now().Add(-time.Hour).Truncate(time.Second)
	s := sqlitetest.MustOpenPath(t, db, sqlite.Options{})
	ctx := t.Context()
	if err := s.RecordSecretUses(ctx, []inbox.SecretUse{{Source: "sume", Fingerprint: "abcd", LastVerified: verified}}); err != nil {
		t.Fatal(err)
	}
	runs := []inbox.Unverified{
		{Source: "sume", Count: 12, First: verified.Add(time.Minute), Last: verified.Add(2 * time.Minute)},
		{Source: "other", Count: 3, First: verified, Last: verified}, // not a source listed
	}
	if err := s.RecordUnverified(ctx, runs); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	out, err = run(t, "sources", "--db", db)
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(out, "\n\n")
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if !ok || len(lines) != 2 || !strings.HasPrefix(lines[0], "SOURCE  FAILED VERIFICATION") {
		t.Fatalf("sources:\n%s\nwant the secrets, then sume's failures alone", out)
	}
	if f := strings.Fields(lines[1]); f[0] != "sume" || f[1] != "12" || !strings.Contains(lines[1], "no: a broken rotation?") {
		t.Errorf("sume's failures: %q, want 12 and none verified since", lines[1])
	}
	if out, err := run(t, "sources", "--db", db, "--json"); err != nil || strings.Contains(out, "FAILED") || strings.Contains(out, `"count"`) || strings.Count(out, "\n") != 1 {
		t.Errorf("--json: %v\n%s\nwant the one secret alone", err, out)
	}
}
