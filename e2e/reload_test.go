package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"inbox/scheme"
)

// Secrets of the reload tests, each written in the file.
const (
	reloadKept    = "reload-kept-secret"
	reloadRetired = "reload-retired-secret"
	reloadAdded   = "reload-added-secret"
)

// reloadConfig is a config file of Sume sources, each name with its
// secrets written in the file.
func reloadConfig(sources ...[]string) string {
	var b strings.Builder
	for _, src := range sources {
		fmt.Fprintf(&b, "[[source]]\nname = %q\nscheme = \"sume\"\n", src[0])
		for _, s := range src[1:] {
			fmt.Fprintf(&b, "[[source.secret]]\nvalue = %q\n", s)
		}
	}
	return b.String()
}

// liveSecrets lists the live config's secrets through inbox sources
// --admin --json.
func liveSecrets(t *testing.T, admin string) []map[string]any {
	t.Helper()
	return cliLines(t, "sources", "--admin", admin, "--json")
}

// cliLines runs the binary with args and reads its output as JSON lines.
func cliLines(t *testing.T, args ...string) []map[string]any {
	t.Helper()
	out, stderr, code := runCLI(t, nil, args...)
	if code != 0 {
		t.Fatalf("inbox %s: exit %d: %s", strings.Join(args, " "), code, stderr)
	}
	var rows []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("inbox %s: %v: %q", strings.Join(args, " "), err, line)
		}
		rows = append(rows, r)
	}
	return rows
}

// waitRefusal waits for s's n-th "reload refused" line, of the file what
// names, and returns it.
func waitRefusal(t *testing.T, s *server, what string, n int) string {
	t.Helper()
	waitFor(t, what+" refused", func() bool { return strings.Count(s.logs.String(), "reload refused") == n })
	var line string
	for _, l := range strings.Split(s.logs.String(), "\n") {
		if strings.Contains(l, "reload refused") {
			line = l
		}
	}
	return line
}

// fingerprint is how inbox sources names secret.
func fingerprint(secret string) string { return scheme.Secret{Key: []byte(secret)}.Fingerprint() }

// TestReloadRotatesUnderLoad rotates a secret by SIGHUP while a loop of
// signed deliveries runs: none of them fails, the added secret verifies
// from the reload on, the retired one no more, inbox sources --admin shows
// the new config, and the retired secret's last use is still saved.
func TestReloadRotatesUnderLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db, cfg := filepath.Join(dir, "inbox.db"), filepath.Join(dir, "inbox.toml")
	writeConfig(t, dir, reloadConfig([]string{"sume", reloadKept, reloadRetired}))
	s := startInbox(t, nil, "serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--db", db, "--config", cfg)
	client := &http.Client{Timeout: 5 * time.Second}
	var n atomic.Int64
	job := func(what string) string { return jobBody(fmt.Sprintf("%s_%d", what, n.Add(1))) }

	if code := send(t, client, s.url, job("added"), reloadAdded); code != 401 {
		t.Fatalf("the secret to add, before the reload: %d, want 401", code)
	}
	if code := send(t, client, s.url, job("retired"), reloadRetired); code != 204 {
		t.Fatalf("the secret to retire, before the reload: %d, want 204", code)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var sent, failed atomic.Int64
	var firstFail atomic.Value
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Timeout: 5 * time.Second}
			for {
				select {
				case <-stop:
					return
				default:
				}
				if code := send(t, c, s.url, job("load"), reloadKept); code != 204 {
					failed.Add(1)
					firstFail.CompareAndSwap(nil, code)
				}
				sent.Add(1)
			}
		}()
	}
	waitFor(t, "load", func() bool { return sent.Load() > 50 })

	writeConfig(t, dir, reloadConfig([]string{"sume", reloadKept, reloadAdded}))
	s.signal(syscall.SIGHUP)
	waitLog(t, s, "reloaded: new requests get the new config")
	before := sent.Load()
	if code := send(t, client, s.url, job("added"), reloadAdded); code != 204 {
		t.Errorf("the added secret, after the reload: %d, want 204", code)
	}
	if code := send(t, client, s.url, job("retired"), reloadRetired); code != 401 {
		t.Errorf("the retired secret, after the reload: %d, want 401", code)
	}
	waitFor(t, "load after the reload", func() bool { return sent.Load() > before+50 })
	close(stop)
	wg.Wait()
	if f := failed.Load(); f != 0 {
		t.Errorf("%d of %d deliveries under load were not 204 (first: %v)\n%s", f, sent.Load(), firstFail.Load(), s.logs)
	}

	rows := liveSecrets(t, s.admin)
	if len(rows) != 2 {
		t.Fatalf("inbox sources --admin: %d secrets, want the 2 of the reloaded file: %v", len(rows), rows)
	}
	added := fingerprint(reloadAdded)
	if rows[1]["fingerprint"] != added || rows[1]["last_verified_at"] == nil {
		t.Errorf("inbox sources --admin: second secret %v, want %s, used", rows[1], added)
	}

	s.signal(syscall.SIGTERM)
	<-s.done
	old := writeConfig(t, t.TempDir(), reloadConfig([]string{"sume", reloadKept, reloadRetired}))
	out, stderr, code := runCLI(t, nil, "sources", "--config", old, "--db", db, "--json")
	if code != 0 {
		t.Fatalf("inbox sources: exit %d: %s", code, stderr)
	}
	var retired map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r map[string]any
		json.Unmarshal([]byte(line), &r)
		if r["fingerprint"] == fingerprint(reloadRetired) {
			retired = r
		}
	}
	if retired == nil || retired["last_verified_at"] == nil {
		t.Errorf("the retired secret's last use was not saved: %v\n%s", retired, out)
	}
}

// TestReloadRefused sends SIGHUP with files serve must refuse: each is
// refused with one log line naming the problem, and the running config
// keeps answering.
func TestReloadRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db, cfg := filepath.Join(dir, "inbox.db"), filepath.Join(dir, "inbox.toml")
	good := reloadConfig([]string{"sume", reloadKept})
	writeConfig(t, dir, good)
	s := startInbox(t, nil, "serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--db", db, "--config", cfg)
	client := &http.Client{Timeout: 5 * time.Second}
	for i, c := range []struct{ name, file, problem string }{
		{"bad toml", good + "\n[[source\n", "config " + cfg},
		{"placeholder", reloadConfig([]string{"sume", reloadKept, "replace-with-the-signing-secret"}), "placeholder"},
		{"duplicate path", good + "[[source]]\nname = \"other\"\nscheme = \"sume\"\npath = \"/webhooks/sume\"\n[[source.secret]]\nvalue = \"" + reloadAdded + "\"\n", "used twice"},
		{"body cap", "[[source]]\nname = \"sume\"\nscheme = \"sume\"\nmax_request = \"40MiB\"\n[[source.secret]]\nvalue = \"" + reloadKept + "\"\n", "--max-body-memory"},
		{"expired", good + "[[source]]\nname = \"old\"\nscheme = \"sume\"\n[[source.secret]]\nvalue = \"x\"\nexpires = 2020-01-01T00:00:00Z\n", "every secret has expired"},
	} {
		writeConfig(t, dir, c.file)
		s.signal(syscall.SIGHUP)
		if line := waitRefusal(t, s, c.name, i+1); !strings.Contains(line, c.problem) {
			t.Errorf("%s: the refusal %s does not name %q", c.name, line, c.problem)
		}
		if code := send(t, client, s.url, jobBody(fmt.Sprintf("job_%d", i)), reloadKept); code != 204 {
			t.Errorf("%s: the running config after the refusal: %d, want 204", c.name, code)
		}
		if rows := liveSecrets(t, s.admin); len(rows) != 1 {
			t.Errorf("%s: inbox sources --admin shows %d secrets, want the running config's 1", c.name, len(rows))
		}
	}
	if strings.Contains(s.logs.String(), "reloaded") {
		t.Errorf("a refused file was put into effect:\n%s", s.logs)
	}
}

// TestReloadAddsAndRemovesSources reloads a file with one source removed
// and one added: the removed one's path answers 404, the added one's
// stores deliveries.
func TestReloadAddsAndRemovesSources(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db, cfg := filepath.Join(dir, "inbox.db"), filepath.Join(dir, "inbox.toml")
	writeConfig(t, dir, reloadConfig([]string{"sume", reloadKept}, []string{"gone", reloadKept}))
	s := startInbox(t, nil, "serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--db", db, "--config", cfg)
	client := &http.Client{Timeout: 5 * time.Second}
	base := strings.TrimSuffix(s.url, "/webhooks/sume")
	if code := send(t, client, base+"/webhooks/gone", jobBody("job_1"), reloadKept); code != 204 {
		t.Fatalf("gone, before the reload: %d, want 204", code)
	}
	if code := send(t, client, base+"/webhooks/new", jobBody("job_1"), reloadKept); code != 404 {
		t.Fatalf("new, before the reload: %d, want 404", code)
	}
	writeConfig(t, dir, reloadConfig([]string{"sume", reloadKept}, []string{"new", reloadKept}))
	s.signal(syscall.SIGHUP)
	waitLog(t, s, "reloaded: new requests get the new config")
	if code := send(t, client, base+"/webhooks/gone", jobBody("job_2"), reloadKept); code != 404 {
		t.Errorf("gone, after the reload: %d, want 404", code)
	}
	if code := send(t, client, base+"/webhooks/new", jobBody("job_2"), reloadKept); code != 204 {
		t.Errorf("new, after the reload: %d, want 204", code)
	}
	if code := send(t, client, s.url, jobBody("job_2"), reloadKept); code != 204 {
		t.Errorf("sume, after the reload: %d, want 204", code)
	}
	var names []string
	for _, r := range liveSecrets(t, s.admin) {
		names = append(names, r["source"].(string))
	}
	if strings.Join(names, ",") != "sume,new" {
		t.Errorf("inbox sources --admin: sources %v, want sume,new", names)
	}
	out, _, _ := runCLI(t, nil, "show", "--db", db, "new/job_2")
	if !strings.Contains(out, "job_2") {
		t.Errorf("the added source's row is not stored: %s", out)
	}
}

// TestReloadWithoutConfig sends SIGHUP to serve without --config: it says
// there is nothing to reload and keeps serving.
func TestReloadWithoutConfig(t *testing.T) {
	t.Parallel()
	s := startServer(t, filepath.Join(t.TempDir(), "inbox.db"))
	s.signal(syscall.SIGHUP)
	waitFor(t, "nothing to reload", func() bool { return strings.Contains(s.logs.String(), "nothing to reload") })
	if code := send(t, &http.Client{Timeout: 5 * time.Second}, s.url, jobBody("job_1"), e2eSecret); code != 204 {
		t.Errorf("after SIGHUP: %d, want 204", code)
	}
}
