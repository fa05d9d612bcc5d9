package e2e

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestExecWithholdsSecrets runs the real binary, inbox dispatch and inbox
// serve, with --config and an --exec command that dumps its environment:
// no variable a [[source.secret]] names reaches it, nor any variable that
// holds a configured secret under another name (equal to it, inside a URL,
// with spaces around it, or as whsec_ and its base64), nor the INBOX_* and
// SUME_* ones; the rest of the environment does.
func TestExecWithholdsSecrets(t *testing.T) {
	const (
		vibeSecret = "vjs_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"
		vibeOld    = "vjs_HyAhIiMkJSYnKCkqKywtLi8wMTIzNDU2Nzg5Ojs8PT4"
		ghSecret   = "gh-hook-secret-4f1c9a"
		fileKey    = "file-held-standard-key-0123456789"
	)
	fileSecret := "whsec_" + base64.StdEncoding.EncodeToString([]byte(fileKey))
	dir := t.TempDir()
	cfg := filepath.Join(dir, "inbox.toml")
	if err := os.WriteFile(cfg, []byte(`
[[source]]
name = "vibe"
scheme = "vibe"
[[source.secret]]
env = "VIBE_JOB_SIGNING_SECRET"
[[source.secret]]
env = "VIBE_JOB_SIGNING_SECRET_PREVIOUS"
expires = 2099-01-01T00:00:00Z

[[source]]
name = "hooks"
scheme = "standard-webhooks"
[[source.secret]]
value = "`+fileSecret+`"

[[source]]
name = "gh"
scheme = "github"
[[source.secret]]
env = "GH_HOOK_SECRET"
`), 0o600); err != nil {
		t.Fatal(err)
	}
	secrets := []string{vibeSecret, vibeOld, ghSecret, fileSecret, e2eSecret,
		base64.StdEncoding.EncodeToString([]byte(fileKey)), "sume-api-key-9d8e7f"}
	for k, v := range map[string]string{
		// Named by the config.
		"VIBE_JOB_SIGNING_SECRET":          vibeSecret,
		"VIBE_JOB_SIGNING_SECRET_PREVIOUS": vibeOld,
		"GH_HOOK_SECRET":                   ghSecret,
		// A secret under another name.
		"APP_VIBE_COPY": vibeSecret,
		"APP_DB_URL":    "postgres://app:" + ghSecret + "@db.internal/app",
		"APP_HOOKS":     fileSecret,
		"APP_HOOKS_KEY": " " + fileKey + "\n",
		"APP_SUME":      e2eSecret,
		"APP_API":       "sume-api-key-9d8e7f",
		"APP_REENCODED": "whsec_" + base64.StdEncoding.EncodeToString([]byte(ghSecret)),
		// The inbox's own.
		"SUME_COM_WEBHOOK_SIGNING_SECRET": e2eSecret,
		"SUME_API_KEY":                    "sume-api-key-9d8e7f",
		// The application's: kept.
		"APP_MODE": "production",
	} {
		t.Setenv(k, v)
	}
	withheld := []string{"VIBE_JOB_SIGNING_SECRET", "VIBE_JOB_SIGNING_SECRET_PREVIOUS", "GH_HOOK_SECRET",
		"APP_VIBE_COPY", "APP_DB_URL", "APP_HOOKS", "APP_HOOKS_KEY", "APP_SUME", "APP_API", "APP_REENCODED",
		"SUME_COM_WEBHOOK_SIGNING_SECRET", "SUME_API_KEY", "INBOX_CONFIG"}

	check := func(t *testing.T, out string) {
		t.Helper()
		var env []byte
		deadline := time.Now().Add(20 * time.Second)
		for {
			var err error
			if env, err = os.ReadFile(filepath.Join(out, "job_0000.env")); err == nil && strings.Contains(string(env), "INBOX_ATTEMPT=") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the command never ran")
			}
			time.Sleep(20 * time.Millisecond)
		}
		names := map[string]bool{}
		for _, kv := range strings.Split(string(env), "\n") {
			name, _, _ := strings.Cut(kv, "=")
			names[name] = true
		}
		for _, name := range withheld {
			if names[name] {
				t.Errorf("the command saw %s", name)
			}
		}
		for _, s := range secrets {
			if strings.Contains(string(env), s) {
				t.Errorf("the command's environment holds a configured secret (%d bytes)", len(s))
			}
		}
		for _, kv := range []string{"APP_MODE=production", "INBOX_KEY=job_0000", "INBOX_SOURCE=sume", "INBOX_ATTEMPT=1"} {
			if !strings.Contains(string(env), kv+"\n") {
				t.Errorf("the command's environment lacks %s", kv)
			}
		}
		if !names["PATH"] {
			t.Errorf("the command lost PATH: %v", names)
		}
	}
	command := func(out string) string { return `env > "` + out + `/$INBOX_KEY.env"` }

	t.Run("dispatch", func(t *testing.T) {
		db, out := fillDB(t, 1), t.TempDir()
		t.Setenv("INBOX_CONFIG", cfg) // as inbox-dispatch.service gets it from inbox.env
		d := startDispatch(t, "--db", db, "--exec", command(out))
		check(t, out)
		if strings.Contains(d.logs.String(), ghSecret) {
			t.Error("the log holds a secret")
		}
	})
	t.Run("serve", func(t *testing.T) {
		db, out := fillDB(t, 1), t.TempDir()
		srv := startServer(t, db, "--config", cfg, "--exec", command(out))
		check(t, out)
		if strings.Contains(srv.logs.String(), ghSecret) {
			t.Error("the log holds a secret")
		}
	})
}
