package e2e

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDestinationSecretMessage: a [[destination]] table whose secret (as
// secret, or through secret_env) is not whsec_ and base64 stops dispatch
// and serve with one line naming the file, the destination and its key,
// never INBOX_FORWARD_SECRET (which is not set) nor the secret; the flag's
// secret is still named as the flag.
func TestDestinationSecretMessage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "inbox.db")
	startServer(t, db) // creates it
	for _, tt := range []struct {
		name, table, want string
	}{
		{"secret", destTable("billing", "http://127.0.0.1:1/jobs", `secret = "raw-key-r30"`), "destination 1 (billing): secret: "},
		{"secret_env", destTable("billing", "http://127.0.0.1:1/jobs", `secret_env = "BILLING_SECRET_R30"`), "destination 1 (billing): secret_env BILLING_SECRET_R30: "},
		{"not base64", destTable("crm", "http://127.0.0.1:1/jobs", `secret = "whsec_raw-key-r30!"`), "destination 1 (crm): secret: "},
	} {
		cfg := writeConfig(t, dir, fanOutText(tt.table))
		env := []string{"BILLING_SECRET_R30=raw-key-r30"}
		for _, args := range [][]string{
			{"dispatch", "--db", db, "--config", cfg},
			{"serve", "--addr", "127.0.0.1:0", "--db", db, "--config", cfg},
		} {
			_, errOut, code := runCLI(t, append(env, "SUME_COM_WEBHOOK_SIGNING_SECRET="+e2eSecret), args...)
			if code == 0 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, cfg) ||
				!strings.Contains(errOut, tt.want) || !strings.Contains(errOut, "whsec_") ||
				strings.Contains(errOut, "INBOX_FORWARD_SECRET") || strings.Contains(errOut, "forward-secret") || strings.Contains(errOut, "raw-key-r30") {
				t.Errorf("%s, %s: exit %d, stderr %q; want one line naming %s, %q and the form, and no variable or flag", tt.name, args[0], code, errOut, cfg, tt.want)
			}
		}
	}
	_, errOut, code := runCLI(t, []string{"INBOX_FORWARD_SECRET=raw-key-r30"}, "dispatch", "--db", db, "--forward-url", "http://127.0.0.1:1/jobs")
	if code == 0 || !strings.Contains(errOut, "INBOX_FORWARD_SECRET (or --forward-secret)") || strings.Contains(errOut, "raw-key-r30") {
		t.Errorf("a raw INBOX_FORWARD_SECRET: exit %d, stderr %q; want the variable named", code, errOut)
	}
}

// TestStatsWatchFlagsAfterInterval: stats --watch INTERVAL takes the
// flags after its interval (--json, --db), as its help writes them;
// elsewhere a flag after an argument is named as not read, never hidden
// behind "takes no arguments" or a wrong count.
func TestStatsWatchFlagsAfterInterval(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inbox.db")
	startServer(t, db)
	for _, args := range [][]string{
		{"stats", "--watch", "200ms", "--json", "--db", db},
		{"stats", "--db", db, "--watch", "200ms", "--json"},
		{"stats", "--json", "--watch", "200ms", "--db=" + db},
	} {
		cmd := exec.Command(binary(t), args...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.AfterFunc(1500*time.Millisecond, func() { cmd.Process.Signal(syscall.SIGINT) })
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%v: %v, stderr %q", args, err, errOut.String())
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("%v: still running 10s on", args)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) < 2 {
			t.Errorf("%v: %d frames, want several JSON lines: stdout %q, stderr %q", args, len(lines), out.String(), errOut.String())
		}
		for _, l := range lines {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Errorf("%v: a frame is no JSON object: %q", args, l)
				break
			}
		}
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"stats", "--db", db, "--watch", "2s", "extra"}, `"extra" after --watch 2s`},
		{[]string{"stats", "--db", db, "--watch", "2s", "--bogus"}, "-bogus"},
		{[]string{"list", "--db", db, "--json", "true", "--status", "parked"}, "--status after it was not read as a flag"},
		{[]string{"parked", "--db", db, "--json", "false", "--reason", "unparseable"}, "--reason after it was not read as a flag"},
		{[]string{"pause", "billing", "--db", db}, "--db after the arguments"},
		{[]string{"show", "--db", db, "--json", "true", "job_1"}, `"true" after a flag that takes no value (such as --json)`},
		{[]string{"reprocess", "--db", db, "--dry-run", "false", "job_1"}, `"false" after a flag that takes no value (such as --dry-run)`},
	} {
		out, errOut, code := runCLI(t, nil, tt.args...)
		if code == 0 || out != "" || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want one line saying %q", tt.args, code, out, errOut, tt.want)
		}
	}
}
