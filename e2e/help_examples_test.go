package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestHelpExamplesRun reads `inbox help` of the binary and of every
// command it lists, takes each line of their Examples that runs inbox
// (after any VAR=value), and runs it with inbox --check: the command
// reads its flags, arguments, environment and --config as it always does,
// and stops before its first work. Every example must be accepted, so an
// example refused for a value (--parked-every-hour 90m: whole hours), a
// flag that is gone or two that conflict fails here.
//
// The examples run in a folder of their own, with the environment serve
// has on a VM (the signing secrets of the shipped inbox.toml's sources),
// the shipped inbox.toml as /etc/inbox/inbox.toml and inbox.toml, or, for
// an example about [[destination]] tables, that file with destinations
// added, and a delivery.json.
func TestHelpExamplesRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	shipped, err := os.ReadFile("../deploy/inbox.toml")
	if err != nil {
		t.Fatal(err)
	}
	sources := filepath.Join(dir, "inbox.toml")
	withDests := filepath.Join(dir, "destinations.toml")
	dests := "\n[[destination]]\nname = \"crm\"\nurl = \"http://127.0.0.1:3000/jobs\"\n\n[[destination]]\nname = \"newc\"\nexec = \"./handle-job.sh\"\n"
	for path, text := range map[string]string{
		sources:                             string(shipped),
		withDests:                           string(shipped) + dests,
		filepath.Join(dir, "delivery.json"): `{"event":"job.completed","job_id":"job_1","status":"COMPLETED"}`,
	} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(),
		"SUME_COM_WEBHOOK_SIGNING_SECRET=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		"VIBE_JOB_SIGNING_SECRET=vjs_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8",
		"GITHUB_WEBHOOK_SECRET=a-github-webhook-secret")

	// check runs line as the test runs each example: nil when accepted.
	check := func(line string) error {
		vars, args, err := shellWords(line)
		if err != nil {
			return err
		}
		file := sources
		if strings.Contains(line, "[[destination]]") || slices.Contains(args, "--destination") {
			file = withDests
		}
		for i, a := range args {
			if a == "/etc/inbox/inbox.toml" || a == "inbox.toml" {
				args[i] = file
			}
		}
		cmd := exec.Command(binary(t), append([]string{"--check"}, args[1:]...)...)
		cmd.Dir = dir
		cmd.Env = append(env, vars...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil || stdout.Len() > 0 || stderr.Len() > 0 {
			return fmt.Errorf("%v, stdout %q, stderr %q", err, stdout.String(), stderr.String())
		}
		return nil
	}
	// What the check must refuse, or it would pass any example.
	for _, line := range []string{
		"inbox alert --parked-every-hour 90m",
		"inbox list --status done --status parked",
		"inbox serve --config inbox.toml --secret s",
		"SUME_COM_WEBHOOK_SIGNING_SECRET= inbox send",
		"inbox backup a.db b.db",
		"inbox dispatch --config inbox.toml",
	} {
		if check(line) == nil {
			t.Errorf("%s: accepted, want it refused", line)
		}
	}

	examples := helpExamples(t, nil)
	if len(examples) < 100 {
		t.Fatalf("found %d examples in the help: too few, the test reads it wrong", len(examples))
	}
	for _, ex := range examples {
		if err := check(ex.line); err != nil {
			t.Errorf("inbox help %s: the example\n\t%s\nis refused: %v", ex.command, ex.line, err)
		}
	}
}

// example is a line of a command's Examples that runs inbox.
type example struct {
	command string // the command whose help it is in; "" for inbox's own
	line    string
}

// helpExamples returns the examples of `inbox help` under path (a command
// and its subcommands) and of every command it lists, and theirs.
func helpExamples(t *testing.T, path []string) []example {
	t.Helper()
	help, errOut, code := runCLI(t, nil, append([]string{"help"}, path...)...)
	if code != 0 {
		t.Fatalf("inbox help %s: exit %d: %s", strings.Join(path, " "), code, errOut)
	}
	var out []example
	_, ex, ok := strings.Cut(help, "Examples:\n")
	if !ok {
		t.Errorf("inbox help %s has no Examples", strings.Join(path, " "))
	}
	ex, _, _ = strings.Cut(ex, "\n\n")
	for _, line := range strings.Split(ex, "\n") {
		line = strings.TrimSpace(line)
		if runsInbox.MatchString(line) {
			out = append(out, example{strings.Join(path, " "), line})
		}
	}
	_, list, ok := strings.Cut(help, "COMMANDS:\n")
	if !ok {
		return out
	}
	list, _, _ = strings.Cut(list, "\n\n")
	for _, m := range regexp.MustCompile(`(?m)^\s+([a-z]+)(?:, [a-z]+)?\s`).FindAllStringSubmatch(list, -1) {
		if m[1] != "help" {
			out = append(out, helpExamples(t, append(path, m[1]))...)
		}
	}
	return out
}

// runsInbox matches a line that runs inbox, after any VAR=value.
var runsInbox = regexp.MustCompile(`^([A-Z_]+=\S+\s+)*inbox\s`)

// shellWords splits line as sh would into its leading VAR=value
// assignments and its words, up to a pipe, a redirection or a comment:
// quotes are removed, and a $(...) stays in its word as written.
func shellWords(line string) (vars, words []string, err error) {
	var word strings.Builder
	inWord, quote, depth := false, rune(0), 0
	end := func() {
		if inWord {
			words = append(words, word.String())
		}
		word.Reset()
		inWord = false
	}
loop:
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				word.WriteRune(r)
			}
		case depth > 0:
			word.WriteRune(r)
			if r == ')' {
				depth--
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == '$' && strings.HasPrefix(line[i:], "$("):
			depth, inWord = 1, true
			word.WriteRune(r)
		case r == ' ' || r == '\t':
			end()
		case r == '|' || r == '>' || r == '<' || r == '#' || r == ';' || r == '&':
			break loop
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, nil, errUnclosedQuote
	}
	end()
	for len(words) > 0 && regexp.MustCompile(`^[A-Z_]+=`).MatchString(words[0]) {
		vars, words = append(vars, words[0]), words[1:]
	}
	return vars, words, nil
}

var errUnclosedQuote = errors.New("an unclosed quote")
