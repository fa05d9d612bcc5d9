package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

// envFile reads deploy/inbox.env: each variable, set or commented out, and
// its value.
func envFile(t *testing.T) (set, commented map[string]string) {
	t.Helper()
	b, err := os.ReadFile("deploy/inbox.env")
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

// TestDeployEnvFile checks that inbox.env lists every variable of serve's
// and dispatch's flags and every secret inbox.toml names, and sets nothing
// serve refuses once INBOX_CONFIG is uncommented.
func TestDeployEnvFile(t *testing.T) {
	set, commented := envFile(t)
	app := newApp(io.Discard, io.Discard)
	for _, name := range []string{"serve", "dispatch"} {
		for _, f := range app.Command(name).Flags {
			for _, env := range f.(cli.DocGenerationFlag).GetEnvVars() {
				if _, ok := set[env]; !ok {
					if _, ok := commented[env]; !ok {
						t.Errorf("inbox.env lacks %s (%s --%s)", env, name, f.Names()[0])
					}
				}
			}
		}
	}
	toml, err := os.ReadFile("deploy/inbox.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^#?env = "([A-Z0-9_]+)"`).FindAllStringSubmatch(string(toml), -1) {
		if _, ok := set[m[1]]; !ok {
			if _, ok := commented[m[1]]; !ok {
				t.Errorf("inbox.toml names %s, inbox.env does not list it", m[1])
			}
		}
	}
	for _, env := range []string{"INBOX_PATH", "INBOX_TOLERANCE", "INBOX_EVENTS", "INBOX_MAX_BODY", "INBOX_MAX_REQUEST"} {
		if _, ok := set[env]; ok {
			t.Errorf("inbox.env sets %s: serve refuses it once INBOX_CONFIG is uncommented", env)
		}
	}
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
	// The operator puts Vibe's secret in place of the placeholder: serve
	// checks its form (vjs_ and 43 base64url characters).
	env = append(env, "VIBE_JOB_SIGNING_SECRET=vjs_"+strings.Repeat("A", 43))
	abs, err := filepath.Abs("deploy/inbox.toml")
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
		b, err := os.ReadFile(filepath.Join("deploy", name))
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
