package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"inbox/metrics/metricstest"
	"inbox/scheme"
)

// TestThreeSources serves one config file with a Sume, a Vibe and a
// GitHub source from the real binary: each keeps its own rows and its own
// answers, and inbox sources shows which secret verified.
func TestThreeSources(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "inbox.db")
	cfg := filepath.Join(dir, "inbox.toml")
	const vibeSecret = "vjs_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"
	err := os.WriteFile(cfg, []byte(`
[[source]]
name = "sume"
scheme = "sume"
[[source.secret]]
env = "SUME_COM_WEBHOOK_SIGNING_SECRET"

[[source]]
name = "vibe"
scheme = "vibe"
[[source.secret]]
value = "`+vibeSecret+`"

[[source]]
name = "gh"
scheme = "github"
events = ["push"]
[[source.secret]]
value = "retired"
expires = 2020-01-01T00:00:00Z
[[source.secret]]
value = "It's a Secret to Everybody"
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, db, "--config", cfg)
	base := strings.TrimSuffix(s.url, "/webhooks/sume")
	client := &http.Client{Timeout: 5 * time.Second}
	post := func(path, body string, h http.Header) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	if code := send(t, client, s.url, `{"event":"job.completed","job_id":"job_1","status":"COMPLETED"}`, e2eSecret); code != 204 {
		t.Errorf("sume: %d, want 204", code)
	}
	vibeBody := `{"type":"scheduled_job.run","jobId":"job_1","runId":"run_1","scheduledFor":"2026-10-09T09:00:00.000Z","attempt":1,"late":false,"trigger":"schedule"}`
	vh := http.Header{}
	vh.Set(scheme.HeaderVibeCaller, "schedule")
	vh.Set(scheme.HeaderVibeSignature, scheme.SignVibe(vibeSecret, time.Now().Unix(), []byte(vibeBody)))
	for range 2 {
		if code, body := post("/webhooks/vibe", vibeBody, vh); code != 202 || body != `{"accepted":true}` {
			t.Errorf("vibe: %d %q, want 202 with the saved answer", code, body)
		}
	}
	gh := func(secret, delivery, event string) http.Header {
		h := http.Header{}
		h.Set(scheme.HeaderGitHubSignature, scheme.SignGitHub(secret, []byte(`{"ref":"main"}`)))
		h.Set(scheme.HeaderGitHubDelivery, delivery)
		h.Set(scheme.HeaderGitHubEvent, event)
		return h
	}
	if code, _ := post("/webhooks/gh", `{"ref":"main"}`, gh("It's a Secret to Everybody", "job_1", "push")); code != 200 {
		t.Errorf("github: %d, want 200", code)
	}
	if code, _ := post("/webhooks/gh", `{"ref":"main"}`, gh("retired", "d-2", "push")); code != 401 {
		t.Errorf("github, expired secret: %d, want 401", code)
	}
	// A Sume-signed body on the GitHub path is not GitHub's.
	if code := send(t, client, base+"/webhooks/gh", `{"event":"job.completed","job_id":"job_9"}`, e2eSecret); code != 401 {
		t.Errorf("sume delivery on the github path: %d, want 401", code)
	}

	got := metricstest.Scrape(t, s.admin+"/metrics")
	metricstest.Expect(t, got, map[string]float64{
		`inbox_deliveries_total{outcome="stored",reason="",source="vibe"}`:         1,
		`inbox_deliveries_total{outcome="rejected",reason="mismatch",source="gh"}`: 1,
		`inbox_deliveries_total{outcome="stored",reason="",source="sume"}`:         1,
	})

	s.signal(syscall.SIGTERM) // saves the secret uses
	<-s.done
	out, errOut, code := runCLI(t, nil, "list", "--db", db)
	if code != 0 {
		t.Fatalf("list: %d %s", code, errOut)
	}
	for _, id := range []string{"job_1", "vibe/run_1", "gh/job_1"} {
		if !strings.Contains(out, id+" ") {
			t.Errorf("list lacks %s:\n%s", id, out)
		}
	}
	out, errOut, code = runCLI(t, []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}, "sources", "--config", cfg, "--db", db)
	if code != 0 {
		t.Fatalf("sources: %d %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 {
		t.Fatalf("sources:\n%s\nwant a header and four secrets", out)
	}
	for i, wantVerified := range []bool{true, true, false, true} {
		f := strings.Fields(lines[i+1])
		if verified := f[len(f)-1] != "-"; verified != wantVerified {
			t.Errorf("sources line %q: verified %v, want %v", lines[i+1], verified, wantVerified)
		}
	}
	if strings.Contains(out, vibeSecret) || strings.Contains(out, "Everybody") {
		t.Error("sources shows a secret")
	}
}

// TestConfigRefusesSumeFlags checks that serve with --config refuses the
// flags that only describe the Sume source, rather than ignoring them, with
// one line and before the database is created; the signing secret's
// variable stays allowed, since the file may name it.
func TestConfigRefusesSumeFlags(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, `
[[source]]
name = "sume"
scheme = "sume"
[[source.secret]]
env = "SUME_COM_WEBHOOK_SIGNING_SECRET"
`)
	secretEnv := "SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret
	for _, tc := range []struct {
		flag string
		env  []string
		args []string
	}{
		{"--secret", []string{secretEnv}, []string{"--secret", "other"}},
		{"--secret", nil, []string{"--secret", "other"}},
		{"--path", []string{secretEnv}, []string{"--path", "/hooks"}},
		{"--path", []string{secretEnv, "INBOX_PATH=/hooks"}, nil},
		{"--tolerance", []string{secretEnv}, []string{"--tolerance", "1m"}},
		{"--event", []string{secretEnv}, []string{"--event", "job.completed"}},
		{"--event", []string{secretEnv, "INBOX_EVENTS=job.completed"}, nil},
		{"--max-body", []string{secretEnv}, []string{"--max-body", "2MiB"}},
		{"--max-request", []string{secretEnv}, []string{"--max-request", "8MiB"}},
	} {
		db := filepath.Join(dir, "never.db")
		args := append([]string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--config", cfg}, tc.args...)
		out, errOut, code := runCLI(t, tc.env, args...)
		if code == 0 {
			t.Errorf("%v %v: exit 0", tc.env, tc.args)
		}
		if lines := strings.Count(strings.TrimSpace(errOut), "\n") + 1; lines != 1 || out != "" || !strings.Contains(errOut, tc.flag) {
			t.Errorf("%v %v: want one line naming %s, got stdout %q stderr %q", tc.env, tc.args, tc.flag, out, errOut)
		}
		if _, err := os.Stat(db); !os.IsNotExist(err) {
			t.Fatalf("%v %v: the database was created (%v)", tc.env, tc.args, err)
		}
	}
}

// TestConfigRefusesExpiredSource checks that serve does not start with a
// source whose every secret has expired: it would answer 401 to all.
func TestConfigRefusesExpiredSource(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, `
[[source]]
name = "gh"
scheme = "github"
[[source.secret]]
value = "retired"
expires = 2020-01-01T00:00:00Z
`)
	db := filepath.Join(dir, "never.db")
	out, errOut, code := runCLI(t, nil, "serve", "--addr", "127.0.0.1:0", "--db", db, "--config", cfg)
	if code == 0 || out != "" || !strings.Contains(errOut, "expired") || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Errorf("exit %d, stdout %q, stderr %q; want one line about the expired secrets", code, out, errOut)
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("the database was created (%v)", err)
	}
}

// writeConfig writes text as dir/inbox.toml and returns its path.
func writeConfig(t *testing.T, dir, text string) string {
	t.Helper()
	path := filepath.Join(dir, "inbox.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConfigValueSecretsReadable checks that serve warns, and still starts,
// when a config holding secrets (value = ...) is readable by others.
func TestConfigValueSecretsReadable(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, `
[[source]]
name = "gh"
scheme = "github"
[[source.secret]]
value = "It's a Secret to Everybody"
`)
	if err := os.Chmod(cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, filepath.Join(dir, "inbox.db"), "--config", cfg)
	if !strings.Contains(s.logs.String(), "readable by others") {
		t.Errorf("no warning about the readable config:\n%s", s.logs)
	}
	if strings.Contains(s.logs.String(), "Everybody") {
		t.Error("the log shows the secret")
	}
}
