package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestHelpShowsExamples checks that every command's help has an example.
func TestHelpShowsExamples(t *testing.T) {
	var out bytes.Buffer
	app := newApp(&out, io.Discard)
	cmds := []string{""}
	for _, c := range app.Commands {
		cmds = append(cmds, c.Name)
	}
	for _, name := range cmds {
		out.Reset()
		args := []string{"inbox", "--help"}
		if name != "" {
			args = []string{"inbox", name, "--help"}
		}
		if err := newApp(&out, io.Discard).RunContext(context.Background(), args); err != nil {
			t.Fatalf("%s --help: %v", name, err)
		}
		if !strings.Contains(out.String(), "Examples:") || !strings.Contains(out.String(), "inbox "+name) {
			t.Errorf("%q --help has no example:\n%s", name, out.String())
		}
	}
}

// envFile reads deploy/inbox.env: each variable, set or commented out, and
// its value.
func envFile(t *testing.T) (set, commented map[string]string) {
	t.Helper()
	return readEnvFile(t, "deploy/inbox.env")
}

// readEnvFile reads an environment file as systemd does: each variable,
// set or commented out, and its value, one pair of enclosing quotes
// removed.
func readEnvFile(t *testing.T, name string) (set, commented map[string]string) {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	set, commented = map[string]string{}, map[string]string{}
	line := regexp.MustCompile(`^(#?)([A-Z][A-Z0-9_]*)=(.*)$`)
	for _, l := range strings.Split(string(b), "\n") {
		if m := line.FindStringSubmatch(l); m != nil {
			v := m[3]
			if len(v) >= 2 && (v[0] == '\'' || v[0] == '"') && v[len(v)-1] == v[0] {
				v = v[1 : len(v)-1]
			}
			if m[1] == "" {
				set[m[2]] = v
			} else {
				commented[m[2]] = v
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
