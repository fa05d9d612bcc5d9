package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"inbox/metrics/metricstest"
	"inbox/scheme"
	"inbox/sume"
)

// TestThreeSources serves one config file with a Sume, a Vibe and a
// GitHub source from the real binary: each keeps its own rows and its own
// answers, and inbox sources shows which secret verified.
func TestThreeSources(t *testing.T) {
	t.Parallel()
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
		return postWith(t, client, base+path, body, h)
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
	// The secrets, then the failed verifications: gh's two 401s, with no
	// delivery verified after them.
	secrets, failed, _ := strings.Cut(out, "\n\n")
	if f := strings.Split(strings.TrimSpace(failed), "\n"); len(f) != 2 || !strings.HasPrefix(f[0], "SOURCE  FAILED VERIFICATION") ||
		!strings.HasPrefix(strings.Join(strings.Fields(f[1]), " "), "gh 2 ") {
		t.Errorf("sources:\n%s\nwant gh's 2 failed verifications below the secrets", out)
	}
	lines := strings.Split(strings.TrimSpace(secrets), "\n")
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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

// svixSignature signs as the svix library does: base64 of the HMAC-SHA256
// of "<id>.<unix seconds>.<body>" keyed by the base64 after whsec_, sent as
// "v1,<base64>".
func svixSignature(t *testing.T, secret, id string, ts int64, body string) string {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s.%d.%s", id, ts, body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// TestProviderRules drives the real binary with what each provider's own
// rules allow or refuse: Svix's header names for a standard-webhooks source
// (and both sets at once refused), a Stripe-Signature with a scheme other
// than v1, and Vibe runs checked against reference 004's schema and the
// source's expected jobIds before anything is stored. Each verified
// delivery's clock skew is counted per source; forgeries are not.
func TestProviderRules(t *testing.T) {
	t.Parallel()
	const (
		vibeSecret   = "vjs_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"
		swSecret     = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		stripeSecret = "whsec_stripe_test_secret"
	)
	dir := t.TempDir()
	db := filepath.Join(dir, "inbox.db")
	cfg := writeConfig(t, dir, `
[[source]]
name = "sume"
scheme = "sume"
[[source.secret]]
env = "SUME_COM_WEBHOOK_SIGNING_SECRET"

[[source]]
name = "vibe"
scheme = "vibe"
job_ids = ["job_digest", "job_report"]
[[source.secret]]
value = "`+vibeSecret+`"

[[source]]
name = "sw"
scheme = "standard-webhooks"
[[source.secret]]
value = "`+swSecret+`"

[[source]]
name = "stripe"
scheme = "stripe"
[[source.secret]]
value = "`+stripeSecret+`"
`)
	s := startServer(t, db, "--config", cfg)
	base := strings.TrimSuffix(s.url, "/webhooks/sume")
	client := &http.Client{Timeout: 5 * time.Second}
	post := func(path, body string, h http.Header) (int, string) {
		t.Helper()
		return postWith(t, client, base+path, body, h)
	}
	now := time.Now().Unix()
	ts := strconv.FormatInt(now, 10)

	// Standard Webhooks under Svix's names, under the specification's, and
	// under both at once.
	swBody := `{"type":"user.created","data":{"id":"u_1"}}`
	svix := http.Header{}
	svix.Set("svix-id", "msg_svix")
	svix.Set("svix-timestamp", ts)
	svix.Set("svix-signature", "v1,"+base64.StdEncoding.EncodeToString(make([]byte, 32))+" "+svixSignature(t, swSecret, "msg_svix", now, swBody))
	if code, _ := post("/webhooks/sw", swBody, svix); code != 200 {
		t.Errorf("svix-* headers: %d, want 200", code)
	}
	plain := http.Header{}
	plain.Set("webhook-id", "msg_plain")
	plain.Set("webhook-timestamp", ts)
	plain.Set("webhook-signature", svixSignature(t, swSecret, "msg_plain", now, swBody))
	if code, _ := post("/webhooks/sw", swBody, plain); code != 200 {
		t.Errorf("webhook-* headers: %d, want 200", code)
	}
	both := http.Header{}
	for _, id := range []string{"msg_both"} {
		sig := svixSignature(t, swSecret, id, now, swBody)
		both.Set("svix-id", id)
		both.Set("svix-timestamp", ts)
		both.Set("svix-signature", sig)
		both.Set("webhook-id", id)
		both.Set("webhook-timestamp", ts)
		both.Set("webhook-signature", sig)
	}
	if code, _ := post("/webhooks/sw", swBody, both); code != 401 {
		t.Errorf("both sets of headers: %d, want 401", code)
	}

	// Stripe: a v2 entry beside v1 is skipped.
	stripeBody := `{"id":"evt_1","object":"event","type":"invoice.paid"}`
	st := http.Header{}
	st.Set(scheme.HeaderStripeSignature, scheme.SignStripe(now, []byte(stripeBody), stripeSecret)+",v2="+strings.Repeat("ab", 32))
	if code, _ := post("/webhooks/stripe", stripeBody, st); code != 200 {
		t.Errorf("stripe with a v2 entry: %d, want 200", code)
	}

	// Vibe: the schema and the expected jobIds, before anything is stored.
	run := func(old, new string) string {
		return strings.Replace(`{"type":"scheduled_job.run","jobId":"job_digest","runId":"run_ok","scheduledFor":"2026-10-09T09:00:00.000Z","attempt":1,"late":false,"trigger":"schedule"}`, old, new, 1)
	}
	vibe := func(body string) http.Header {
		h := http.Header{}
		h.Set(scheme.HeaderVibeCaller, "schedule")
		h.Set(scheme.HeaderVibeSignature, scheme.SignVibe(vibeSecret, now, []byte(body)))
		return h
	}
	if code, body := post("/webhooks/vibe", run("", ""), vibe(run("", ""))); code != 202 || body != `{"accepted":true}` {
		t.Errorf("an expected job's run: %d %q, want 202", code, body)
	}
	for name, body := range map[string]string{
		"an unexpected jobId":         run(`"jobId":"job_digest","runId":"run_ok"`, `"jobId":"job_other","runId":"run_other_job"`),
		"scheduledFor without millis": run(`"runId":"run_ok","scheduledFor":"2026-10-09T09:00:00.000Z"`, `"runId":"run_no_ms","scheduledFor":"2026-10-09T09:00:00Z"`),
		"scheduledFor with an offset": run(`"runId":"run_ok","scheduledFor":"2026-10-09T09:00:00.000Z"`, `"runId":"run_offset","scheduledFor":"2026-10-09T11:00:00.000+02:00"`),
		"another type":                run(`"type":"scheduled_job.run","jobId":"job_digest","runId":"run_ok"`, `"type":"job.run","jobId":"job_digest","runId":"run_type"`),
		"runId twice":                 run(`"runId":"run_ok"`, `"runId":"run_ok","runId":"run_twice"`),
	} {
		if code, _ := post("/webhooks/vibe", body, vibe(body)); code != 400 {
			t.Errorf("%s: %d, want 400", name, code)
		}
	}

	// Skew: a Sume delivery signed 90 s ago, and a forged one.
	late := job("job_late")
	lateTS := strconv.FormatInt(now-90, 10)
	lh := http.Header{}
	lh.Set(sume.HeaderTimestamp, lateTS)
	lh.Set(sume.HeaderSignature, sume.SignatureHeader(lateTS, []byte(late), e2eSecret))
	if code, _ := post("/webhooks/sume", late, lh); code != 204 {
		t.Errorf("sume, signed 90s ago: %d, want 204", code)
	}
	lh.Set(sume.HeaderSignature, sume.SignatureHeader(lateTS, []byte(late), "forged"))
	if code, _ := post("/webhooks/sume", late, lh); code != 401 {
		t.Errorf("sume, forged: %d, want 401", code)
	}

	got := metricstest.Scrape(t, s.admin+"/metrics")
	for src, want := range map[string]struct {
		n        float64
		min, max float64
	}{
		"sume":   {1, 90, 93},
		"vibe":   {6, 0, 12}, // the refused payloads were verified too: their time counts
		"sw":     {2, 0, 6},
		"stripe": {1, 0, 3},
	} {
		n, sum := got[`inbox_clock_skew_seconds_count{source="`+src+`"}`], got[`inbox_clock_skew_seconds_sum{source="`+src+`"}`]
		t.Logf("%s: %v verified deliveries, skew sum %.3fs", src, n, sum)
		if n != want.n || sum < want.min || sum > want.max {
			t.Errorf("%s: skew count %v sum %v, want %v in [%v, %v]", src, n, sum, want.n, want.min, want.max)
		}
	}
	if n := got[`inbox_clock_skew_seconds_bucket{le="120",source="sume"}`] - got[`inbox_clock_skew_seconds_bucket{le="60",source="sume"}`]; n != 1 {
		t.Errorf("sume: %v deliveries between 60 and 120 s of skew, want the one signed 90 s ago", n)
	}

	rows := readRows(t, db)
	for _, id := range []string{"sw/msg_svix", "sw/msg_plain", "stripe/evt_1", "vibe/run_ok", "job_late"} {
		if _, ok := rows[id]; !ok {
			t.Errorf("no row %s", id)
		}
	}
	if len(rows) != 5 {
		t.Errorf("rows %v: want only the five accepted deliveries", rows)
	}
}

// TestVibeSecretFormAtStart checks that serve refuses to start when a Vibe
// secret is not in Vibe's form (the shipped placeholder, a truncated paste),
// in one line naming the variable, and before the database is created.
func TestVibeSecretFormAtStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeConfig(t, dir, `
[[source]]
name = "vibe"
scheme = "vibe"
[[source.secret]]
env = "VIBE_JOB_SIGNING_SECRET"
`)
	db := filepath.Join(dir, "never.db")
	for _, secret := range []string{"vjs_replace-with-your-vibe-secret", "vjs_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"} {
		out, errOut, code := runCLI(t, []string{"VIBE_JOB_SIGNING_SECRET=" + secret}, "serve", "--addr", "127.0.0.1:0", "--db", db, "--config", cfg)
		if code != 1 || out != "" || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, "VIBE_JOB_SIGNING_SECRET") || !strings.Contains(errOut, "vjs_") && !strings.Contains(errOut, "placeholder") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want 1 and one line naming VIBE_JOB_SIGNING_SECRET and the form or the placeholder", secret, code, out, errOut)
		}
		if strings.Contains(errOut, secret) {
			t.Errorf("the refusal shows the secret: %s", errOut)
		}
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("the database was created (%v)", err)
	}
}

// postWith POSTs body to url with the headers h and returns the status and
// the answer's body.
func postWith(t *testing.T, client *http.Client, url, body string, h http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
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
