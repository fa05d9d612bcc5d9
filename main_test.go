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

	"inbox/deploy/deploytest"
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

// TestDeployEnvFile checks that inbox.env lists every variable of serve's
// and dispatch's flags and every secret inbox.toml names, and sets nothing
// serve refuses once INBOX_CONFIG is uncommented.
func TestDeployEnvFile(t *testing.T) {
	set, commented := deploytest.EnvFile(t, "inbox.env")
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

// TestConnectErrorsNameNoAddress checks that an operator's command which
// cannot reach a PostgreSQL --db says so without the database's address:
// not its user, host, port or database name (and never the password).
func TestConnectErrorsNameNoAddress(t *testing.T) {
	db := "postgres://opuser:hunter2@127.0.0.1:1/opsdb?sslmode=disable&connect_timeout=2"
	for _, args := range [][]string{
		{"stats"}, {"list"}, {"parked", "--group-by", "reason"}, {"show", "job_1"},
		{"missed"}, {"purge", "--dry-run"}, {"pause", "billing"},
	} {
		var stderr bytes.Buffer
		full := append([]string{"inbox", args[0], "--db", db}, args[1:]...)
		err := newApp(io.Discard, &stderr).RunContext(context.Background(), full)
		if err == nil {
			t.Fatalf("%v: no error from an unreachable database", args)
		}
		msg := err.Error() + stderr.String()
		for _, part := range []string{"opuser", "hunter2", "127.0.0.1", ":1", "opsdb"} {
			if strings.Contains(msg, part) {
				t.Errorf("%v: %q names %q", args, msg, part)
			}
		}
	}
}

// TestVersionWithoutCommit is --version of a build that says nothing of
// its commit (no -ldflags, no checkout recorded: as go test builds this
// package): the version, and plainly that the commit is unknown. The
// -ldflags build is the e2e TestVersionNamesTheBuild, on the real binary.
func TestVersionWithoutCommit(t *testing.T) {
	v := strings.TrimSpace(versionFile)
	if v == "" {
		t.Fatal("VERSION is empty")
	}
	if got, want := version(), v+" (commit unknown)"; got != want {
		t.Errorf("version() = %q, want %q", got, want)
	}
	var out bytes.Buffer
	if err := newApp(&out, io.Discard).Run([]string{"inbox", "--version"}); err != nil {
		t.Fatal(err)
	}
	if want := "inbox version " + v + " (commit unknown)\n"; out.String() != want {
		t.Errorf("inbox --version printed %q, want %q", out.String(), want)
	}
}
