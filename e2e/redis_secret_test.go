package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"inbox/testport"
)

// TestRedisPasswordWithheld runs inbox dispatch with an exec destination
// beside a Redis stream whose redis_url holds a password: the command's
// environment holds no variable with the password, whether the URL or
// the password alone, and no log line, /readyz line or /destinations
// row shows it. The Redis is unreachable: inbox dispatch starts anyway,
// its readiness failing on the stream's line.
func TestRedisPasswordWithheld(t *testing.T) {
	const password = "redis-withheld-7q2x"
	url := fmt.Sprintf("redis://:%s@%s/0", password, testport.Addr(t))
	db, out := fillDB(t, 1), t.TempDir()
	cfg := filepath.Join(t.TempDir(), "inbox.toml")
	text := fmt.Sprintf(`
[[source]]
name = "sume"
scheme = "sume"
[[source.secret]]
value = "s"

[[destination]]
name = "audit"
exec = 'env > "%s/$INBOX_KEY.env"'

[[destination]]
name = "stream"
redis_url = %q
redis_stream = "jobs"
`, out, url)
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("APP_REDIS_URL", url)
	t.Setenv("APP_REDIS_PASSWORD", password)
	t.Setenv("APP_MODE", "production")
	d := startDispatch(t, "--db", db, "--config", cfg, "--admin-addr", "127.0.0.1:0")
	admin := dispatchAdmin(t, d)
	var env []byte
	waitLong(t, 20*time.Second, "the command ran", func() bool {
		env, _ = os.ReadFile(filepath.Join(out, "job_0000.env"))
		return strings.Contains(string(env), "INBOX_ATTEMPT=")
	})
	if strings.Contains(string(env), password) || strings.Contains(string(env), "APP_REDIS_URL=") || strings.Contains(string(env), "APP_REDIS_PASSWORD=") {
		t.Errorf("the command's environment holds the redis password")
	}
	if !strings.Contains(string(env), "APP_MODE=production\n") {
		t.Errorf("the command lost APP_MODE")
	}
	code, ready := get(t, admin+"/readyz")
	if code != 503 || !strings.Contains(ready, "redis stream: unreachable: dispatch paused") {
		t.Errorf("readyz with redis unreachable: %d %q, want 503 naming the stream", code, ready)
	}
	_, dests := get(t, admin+"/destinations")
	for what, text := range map[string]string{"the log": d.logs.String(), "/readyz": ready, "/destinations": dests} {
		if strings.Contains(text, password) {
			t.Errorf("%s holds the redis password", what)
		}
	}
	if !strings.Contains(d.logs.String(), "redis://:xxxxx@") {
		t.Errorf("the log does not name the server, redacted:\n%s", d.logs)
	}
}
