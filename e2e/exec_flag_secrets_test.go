package e2e

import (
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestExecWithholdsFlagSecrets gives serve and dispatch their secrets as
// flags, not variables: --api-key, --secret, and (on PostgreSQL) a --db URL
// with a password. An --exec command that dumps its environment, where the
// same values sit under the application's own names, as they are and
// encoded, sees none of them, just as it would not had they come from
// SUME_API_KEY, SUME_COM_WEBHOOK_SIGNING_SECRET and INBOX_DB.
func TestExecWithholdsFlagSecrets(t *testing.T) {
	const (
		apiKey     = "sume-flag-api-key-51c7e2"
		flagSecret = "flag-signing-secret-a90b33"
		dbPassword = "flag-db-password-77d1"
	)
	secrets := []string{apiKey, flagSecret}
	env := map[string]string{"APP_MODE": "production"}
	copies := map[string][]string{} // the variables holding each secret
	for i, s := range []string{apiKey, flagSecret, dbPassword} {
		for j, form := range []string{s, " " + s + "\n", base64.StdEncoding.EncodeToString([]byte(s)),
			base64.RawURLEncoding.EncodeToString([]byte(s)), hex.EncodeToString([]byte(s)),
			strings.ToUpper(hex.EncodeToString([]byte(s))), "https://app:" + url.QueryEscape(s) + "@app.internal/"} {
			name := "APP_COPY_" + string(rune('A'+i)) + string(rune('A'+j))
			env[name] = form
			copies[s] = append(copies[s], name)
		}
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	check := func(t *testing.T, out string, secrets []string) {
		t.Helper()
		var dump []byte
		deadline := time.Now().Add(20 * time.Second)
		for {
			var err error
			if dump, err = os.ReadFile(filepath.Join(out, "job_0000.env")); err == nil && strings.Contains(string(dump), "INBOX_ATTEMPT=") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the command never ran")
			}
			time.Sleep(20 * time.Millisecond)
		}
		names := map[string]bool{}
		for _, kv := range strings.Split(string(dump), "\n") {
			name, _, _ := strings.Cut(kv, "=")
			names[name] = true
		}
		for _, s := range secrets {
			for _, name := range copies[s] {
				if names[name] {
					t.Errorf("the command saw %s", name)
				}
			}
			for _, form := range []string{s, base64.StdEncoding.EncodeToString([]byte(s)), hex.EncodeToString([]byte(s))} {
				if strings.Contains(string(dump), form) {
					t.Errorf("the command's environment holds a secret given as a flag (%d bytes)", len(s))
				}
			}
		}
		if !strings.Contains(string(dump), "APP_MODE=production\n") {
			t.Error("the command lost APP_MODE")
		}
	}
	command := func(out string) string { return `env > "` + out + `/$INBOX_KEY.env"` }

	t.Run("dispatch", func(t *testing.T) {
		db, out := fillDB(t, 1), t.TempDir()
		startDispatch(t, "--db", db, "--api-key", apiKey, "--exec", command(out))
		check(t, out, []string{apiKey})
	})
	t.Run("serve", func(t *testing.T) {
		db, out := fillDB(t, 1), t.TempDir()
		startInbox(t, nil, "serve", "--addr", "127.0.0.1:0", "--db", db, "--secret", flagSecret,
			"--api-key", apiKey, "--exec", command(out))
		check(t, out, secrets)
	})
	t.Run("postgres", func(t *testing.T) {
		u, err := url.Parse(pgSchema(t)) // trust auth: any password is taken
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(u.User.Username(), dbPassword)
		out := t.TempDir()
		srv := startInbox(t, nil, "serve", "--addr", "127.0.0.1:0", "--db", u.String(), "--secret", flagSecret,
			"--api-key", apiKey, "--exec", command(out))
		if got := send(t, http.DefaultClient, srv.url, `{"event":"job.completed","job_id":"job_0000","status":"COMPLETED"}`, flagSecret); got != http.StatusNoContent {
			t.Fatalf("delivery: %d", got)
		}
		check(t, out, append(secrets, dbPassword))
	})
}
