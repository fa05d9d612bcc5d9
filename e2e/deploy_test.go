package e2e

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// envFile reads deploy/inbox.env: each variable, set or commented out, and
// its value.
func envFile(t *testing.T) (set, commented map[string]string) {
	t.Helper()
	b, err := os.ReadFile("../deploy/inbox.env")
	if err != nil {
		t.Fatal(err)
	}
	set, commented = map[string]string{}, map[string]string{}
	line := regexp.MustCompile(`^(#?)([A-Z][A-Z0-9_]*)=(.*)$`)
	for _, l := range strings.Split(string(b), "\n") {
		if m := line.FindStringSubmatch(l); m != nil {
			if m[1] == "" {
				set[m[2]] = m[3]
			} else {
				commented[m[2]] = m[3]
			}
		}
	}
	return set, commented
}

// TestDeployConfigStarts follows the README's "Several providers" step
// literally: inbox.env with INBOX_CONFIG and the secrets uncommented, and
// deploy/inbox.toml, start serve.
func TestDeployConfigStarts(t *testing.T) {
	set, commented := envFile(t)
	dir := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range set {
		env = append(env, k+"="+v)
	}
	for _, k := range []string{"INBOX_CONFIG", "VIBE_JOB_SIGNING_SECRET", "GITHUB_WEBHOOK_SECRET"} {
		if _, ok := commented[k]; !ok {
			t.Fatalf("inbox.env has no commented %s to uncomment", k)
		}
		env = append(env, k+"="+commented[k])
	}
	// With the secrets set, as the README says: serve refuses the shipped
	// placeholders (TestDeployPlaceholdersRefused).
	env = append(env, realSecrets()...)
	abs, err := filepath.Abs("../deploy/inbox.toml")
	if err != nil {
		t.Fatal(err)
	}
	// The paths of this test's machine instead of the VM's.
	env = append(env, "INBOX_CONFIG="+abs, "INBOX_DB="+filepath.Join(dir, "inbox.db"),
		"INBOX_ADDR=127.0.0.1:0", "INBOX_ADMIN_ADDR=127.0.0.1:0")
	cmd := exec.Command(binary(t), "serve")
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	started := make(chan bool, 1)
	var log strings.Builder
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), `"listening"`) {
				started <- true
				return
			}
		}
		started <- false
	}()
	select {
	case ok := <-started:
		if !ok {
			t.Fatalf("serve with deploy/inbox.toml did not start:\n%s", log.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve with deploy/inbox.toml did not start in time")
	}
}

// TestDeployFiles checks that the dispatch unit keeps serve's sandbox and
// that Caddy passes every source's path.
func TestDeployFiles(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "deploy", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	sandbox := func(unit string) string {
		_, s, ok := strings.Cut(read(unit), "# /var/lib/inbox, owned by User")
		if !ok {
			t.Fatalf("%s: no sandbox section", unit)
		}
		return s
	}
	if sandbox("inbox.service") != sandbox("inbox-dispatch.service") {
		t.Error("inbox-dispatch.service's sandbox differs from inbox.service's")
	}
	if !strings.Contains(read("Caddyfile"), "handle /webhooks/* {") {
		t.Error("Caddyfile does not pass /webhooks/*")
	}
}

// realSecrets sets every secret inbox.toml names to a fresh value of its
// scheme's form.
func realSecrets() []string {
	key := func(prefix string) string {
		b := make([]byte, 32)
		rand.Read(b)
		return prefix + hex.EncodeToString(b)
	}
	// Vibe's form: vjs_ and 43 unpadded base64url characters.
	vibe := func() string {
		b := make([]byte, 32)
		rand.Read(b)
		return "vjs_" + base64.RawURLEncoding.EncodeToString(b)
	}
	return []string{
		"SUME_COM_WEBHOOK_SIGNING_SECRET=" + key("whsec_"),
		"VIBE_JOB_SIGNING_SECRET=" + vibe(),
		"VIBE_JOB_SIGNING_SECRET_PREVIOUS=" + vibe(),
		"GITHUB_WEBHOOK_SECRET=" + key(""),
	}
}

// TestDeployPlaceholdersRefused starts serve and dispatch with each secret
// placeholder the shipped files carry, read from deploy/ so the test
// follows the files: from inbox.env as shipped, through --secret and a
// rotation list, through inbox.toml's env (with its commented rotation
// table uncommented), as a value in the file, and as the forward secret.
// Each is one line naming the variable and exit 1, before any database is
// made.
func TestDeployPlaceholdersRefused(t *testing.T) {
	set, commented := envFile(t)
	placeholders := map[string]string{}
	for _, vars := range []map[string]string{commented, set} {
		for k, v := range vars {
			if strings.Contains(k, "SECRET") && v != "" {
				placeholders[k] = v
			}
		}
	}
	for _, k := range []string{"SUME_COM_WEBHOOK_SIGNING_SECRET", "VIBE_JOB_SIGNING_SECRET", "VIBE_JOB_SIGNING_SECRET_PREVIOUS", "GITHUB_WEBHOOK_SECRET", "INBOX_FORWARD_SECRET"} {
		if placeholders[k] == "" {
			t.Fatalf("inbox.env has no placeholder for %s", k)
		}
	}
	dir := t.TempDir()
	// deploy/inbox.toml with its commented [[source.secret]] tables (the
	// rotation's) uncommented.
	shipped, err := os.ReadFile("../deploy/inbox.toml")
	if err != nil {
		t.Fatal(err)
	}
	toml := filepath.Join(dir, "inbox.toml")
	uncommented := regexp.MustCompile(`(?m)^#(\[\[source\.secret\]\]|env = |expires = )`).ReplaceAllString(string(shipped), "$1")
	if !strings.Contains(uncommented, `env = "VIBE_JOB_SIGNING_SECRET_PREVIOUS"`) || strings.Contains(uncommented, `#env = "VIBE_JOB_SIGNING_SECRET_PREVIOUS"`) {
		t.Fatalf("inbox.toml has no commented rotation table for VIBE_JOB_SIGNING_SECRET_PREVIOUS")
	}
	if err := os.WriteFile(toml, []byte(uncommented), 0o600); err != nil {
		t.Fatal(err)
	}
	valueToml := filepath.Join(dir, "value.toml")
	if err := os.WriteFile(valueToml, []byte("[[source]]\nname = \"github\"\nscheme = \"github\"\n[[source.secret]]\nvalue = \""+placeholders["GITHUB_WEBHOOK_SECRET"]+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	base := []string{"INBOX_ADDR=127.0.0.1:0", "INBOX_ADMIN_ADDR=127.0.0.1:0"}
	shippedEnv := []string{}
	for k, v := range set {
		shippedEnv = append(shippedEnv, k+"="+v)
	}
	type run struct {
		name string
		env  []string // after the real secrets, so these win
		args []string
		want string // the variable the error names
	}
	runs := []run{
		{"inbox.env as shipped", append(slices.Clone(shippedEnv), base...), []string{"serve"}, "SUME_COM_WEBHOOK_SIGNING_SECRET"},
		{"--secret", base, []string{"serve", "--secret", placeholders["SUME_COM_WEBHOOK_SIGNING_SECRET"]}, "SUME_COM_WEBHOOK_SIGNING_SECRET"},
		{"in a rotation list", append([]string{"SUME_COM_WEBHOOK_SIGNING_SECRET=whsec_c2VjcmV0LWtleQ==," + placeholders["SUME_COM_WEBHOOK_SIGNING_SECRET"]}, base...), []string{"serve"}, "SUME_COM_WEBHOOK_SIGNING_SECRET"},
		{"value in the config", base, []string{"serve", "--config", valueToml}, "its value"},
		{"forward secret, serve", append([]string{"INBOX_FORWARD_SECRET=" + placeholders["INBOX_FORWARD_SECRET"]}, base...), []string{"serve", "--forward-url", "http://127.0.0.1:1/"}, "INBOX_FORWARD_SECRET"},
	}
	for _, k := range []string{"SUME_COM_WEBHOOK_SIGNING_SECRET", "VIBE_JOB_SIGNING_SECRET", "VIBE_JOB_SIGNING_SECRET_PREVIOUS", "GITHUB_WEBHOOK_SECRET"} {
		runs = append(runs, run{"config, " + k, append([]string{k + "=" + placeholders[k], "INBOX_CONFIG=" + toml}, base...), []string{"serve"}, k})
	}
	for _, r := range runs {
		// The last of a variable set twice wins: each run its own database.
		db := filepath.Join(t.TempDir(), "inbox.db")
		env := append(append(append([]string{"PATH=" + os.Getenv("PATH")}, realSecrets()...), r.env...), "INBOX_DB="+db)
		cmd := exec.Command(binary(t), r.args...)
		cmd.Env = env
		pipe, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Read stderr to its end, or until serve says it listens.
		var stderr strings.Builder
		listening := false
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			if strings.Contains(sc.Text(), `"listening"`) {
				listening = true
				cmd.Process.Kill()
				break
			}
			stderr.WriteString(sc.Text() + "\n")
		}
		io.Copy(io.Discard, pipe)
		cmd.Wait()
		if listening {
			t.Errorf("%s: serve started with a placeholder secret", r.name)
			continue
		}
		errOut := strings.TrimSpace(stderr.String())
		if code := cmd.ProcessState.ExitCode(); code != 1 || strings.Contains(errOut, "\n") || !strings.Contains(errOut, r.want) || !strings.Contains(errOut, "placeholder") {
			t.Errorf("%s: exit %d, stderr %q; want 1 and one line naming %s and the placeholder", r.name, code, errOut, r.want)
		}
		for k, v := range placeholders {
			if strings.Contains(errOut, v) {
				t.Errorf("%s: the error holds %s's value", r.name, k)
			}
		}
		// serve checks the destination once the store is open (as for a bad
		// --forward-url); the sources' secrets before anything is made.
		if _, err := os.Stat(db); !os.IsNotExist(err) && !strings.HasPrefix(r.name, "forward") {
			t.Fatalf("%s: a database was made before refusing (%v)", r.name, err)
		}
	}
	// dispatch refuses the forward placeholder too.
	dbOK := fillDB(t, 1)
	_, errOut, code := runCLI(t, []string{"INBOX_FORWARD_SECRET=" + placeholders["INBOX_FORWARD_SECRET"]}, "dispatch", "--db", dbOK, "--forward-url", "http://127.0.0.1:1/")
	if code != 1 || !strings.Contains(errOut, "INBOX_FORWARD_SECRET") || !strings.Contains(errOut, "placeholder") {
		t.Errorf("dispatch with the forward placeholder: exit %d, stderr %q", code, errOut)
	}
}
