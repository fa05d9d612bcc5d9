package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// hook is a stand-in for a chat webhook (Slack, Mattermost, ntfy): it
// records each POST and answers status.
type hook struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies [][]byte
	types  []string
}

func newHook(t *testing.T, status int) *hook {
	h := &hook{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		h.mu.Lock()
		if r.Method == http.MethodPost {
			h.bodies = append(h.bodies, b)
			h.types = append(h.types, r.Header.Get("Content-Type"))
		}
		h.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// url is the hook's address with a path that stands for a chat webhook's
// token, which no message may show.
func (h *hook) url() string { return h.srv.URL + "/hooks/T0KEN-in-the-path" }

// posts decodes what the hook received.
func (h *hook) posts(t *testing.T) []map[string]any {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]any
	for i, b := range h.bodies {
		if h.types[i] != "application/json" {
			t.Errorf("notification Content-Type %q, want application/json", h.types[i])
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("notification is not JSON: %v: %s", err, b)
		}
		out = append(out, m)
	}
	return out
}

func (h *hook) raw() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for _, p := range h.bodies {
		b.Write(p)
	}
	return b.String()
}

// TestAlertNotify runs alert --notify against stand-in webhooks: the
// documented JSON reaches each endpoint of --notify and of INBOX_NOTIFY;
// nothing is posted when nothing is found; an endpoint that fails,
// redirects or hangs gives exit 3 with the lines still printed and the
// endpoint named on stderr without its path; a URL that is not http(s)
// is refused with 2 before anything is read; an unreadable inbox is
// notified and exits 2.
func TestAlertNotify(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "inbox.db")
	srv := startServer(t, db)
	if code := send(t, http.DefaultClient, srv.url, "not json", e2eSecret); code != http.StatusNoContent {
		t.Fatalf("poison delivery: %d, want 204", code)
	}

	// Nothing older than a day: silence, and no post.
	quiet := newHook(t, http.StatusOK)
	if out, errOut, code := runCLI(t, nil, "alert", "--db", db, "--max-age", "24h", "--notify", quiet.url()); code != 0 || out != "" || errOut != "" {
		t.Errorf("nothing to alert: exit %d, stdout %q, stderr %q; want 0 and silence", code, out, errOut)
	}
	if n := len(quiet.posts(t)); n != 0 {
		t.Errorf("nothing to alert: %d notifications, want none", n)
	}

	a, b := newHook(t, http.StatusOK), newHook(t, http.StatusNoContent)
	out, errOut, code := runCLI(t, []string{"INBOX_NOTIFY=" + a.url() + "," + b.url()}, "alert", "--db", db, "--max-age", "0s")
	if code != 1 || !strings.HasPrefix(out, "unparseable  1 parked longer than 0s") || errOut != "" {
		t.Fatalf("alert: exit %d, stdout %q, stderr %q; want 1 and the unparseable line", code, out, errOut)
	}
	for name, h := range map[string]*hook{"first": a, "second": b} {
		posts := h.posts(t)
		if len(posts) != 1 {
			t.Fatalf("%s endpoint of INBOX_NOTIFY: %d notifications, want 1", name, len(posts))
		}
		p := posts[0]
		text, _ := p["text"].(string)
		lines, _ := p["lines"].([]any)
		findings, _ := p["findings"].([]any)
		if !strings.Contains(text, "unparseable  1 parked longer than 0s") || p["check"] != "parked" || p["exit_code"] != 1.0 ||
			p["host"] == "" || p["at"] == nil || len(lines) != 1 || len(findings) != 1 {
			t.Errorf("%s endpoint got %v", name, p)
		}
		if f, _ := findings[0].(map[string]any); f["reason"] != "unparseable" || f["count"] != 1.0 {
			t.Errorf("%s endpoint: finding %v, want reason unparseable, count 1", name, findings[0])
		}
		if raw := h.raw(); strings.Contains(raw, e2eSecret) || strings.Contains(raw, db) {
			t.Errorf("%s endpoint: the notification carries the secret or the database: %s", name, raw)
		}
	}

	// The alert's lines still print and its finding still shows as 3, not
	// 0, when an endpoint fails; the good one still gets it.
	good := newHook(t, http.StatusOK)
	failing := newHook(t, http.StatusInternalServerError)
	redirect := httptest.NewServer(http.RedirectHandler(good.url(), http.StatusFound))
	t.Cleanup(redirect.Close)
	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(hang); slow.Close() })
	for _, tt := range []struct {
		name, url, say string
	}{
		{"500", failing.url(), "500"},
		{"redirect", redirect.URL + "/hooks/T0KEN-in-the-path", "redirects are not followed"},
		{"timeout", slow.URL + "/hooks/T0KEN-in-the-path", "Timeout"},
	} {
		began := time.Now()
		out, errOut, code := runCLI(t, nil, "alert", "--db", db, "--max-age", "0s", "--notify-timeout", "300ms", "--notify", tt.url, "--notify", good.url())
		if code != 3 || !strings.HasPrefix(out, "unparseable  1 parked") {
			t.Errorf("%s: exit %d, stdout %q; want 3 and the alert's lines", tt.name, code, out)
		}
		host := tt.url[:strings.Index(tt.url, "/hooks/")]
		if !strings.HasPrefix(errOut, "inbox: notify "+host+": ") || !strings.Contains(errOut, tt.say) || strings.Contains(errOut, "T0KEN") {
			t.Errorf("%s: stderr %q; want the endpoint named by scheme and host, saying %q", tt.name, errOut, tt.say)
		}
		if took := time.Since(began); took > 5*time.Second {
			t.Errorf("%s: took %s with --notify-timeout 300ms", tt.name, took)
		}
	}
	if n := len(good.posts(t)); n != 3 {
		t.Errorf("the good endpoint beside a failing one got %d notifications, want 3 (none through the redirect)", n)
	}

	// A URL that is no http(s) webhook is a mistake: exit 2, nothing read.
	for _, u := range []string{"ftp://example.com/x", "file:///etc/passwd", "example.com/hook", "http:///nohost"} {
		if out, errOut, code := runCLI(t, nil, "alert", "--db", db, "--max-age", "0s", "--notify", u); code != 2 || out != "" || !strings.Contains(errOut, "--notify") {
			t.Errorf("--notify %s: exit %d, stdout %q, stderr %q; want 2 and a word on --notify", u, code, out, errOut)
		}
	}

	// An unreadable inbox is worth a message too.
	missing := newHook(t, http.StatusOK)
	if _, _, code := runCLI(t, nil, "alert", "--db", filepath.Join(dir, "missing.db"), "--notify", missing.url()); code != 2 {
		t.Errorf("missing database: exit %d, want 2", code)
	}
	if posts := missing.posts(t); len(posts) != 1 || posts[0]["check"] != "unreadable" || posts[0]["exit_code"] != 2.0 {
		t.Errorf("missing database: notified %v, want one unreadable notice", posts)
	}
}

// sumeSourceTOML is a config's Sume source, its secret read from the
// variable startServer sets.
const sumeSourceTOML = `
[[source]]
name = "sume"
scheme = "sume"
[[source.secret]]
env = "SUME_COM_WEBHOOK_SIGNING_SECRET"
`

// TestAlertQuietFor serves two sources and delivers to one: alert
// --quiet-for names the other (never verified) and not the busy one, until
// the busy one has been quiet for the duration asked; the notification
// says the same.
func TestAlertQuietFor(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "inbox.db")
	cfg := writeConfig(t, dir, sumeSourceTOML+`
[[source]]
name = "gh"
scheme = "github"
[[source.secret]]
value = "It's a Secret to Everybody"
`)
	srv := startServer(t, db, "--config", cfg)
	for _, id := range []string{"job_1", "job_2"} {
		if code := send(t, http.DefaultClient, srv.url, `{"event":"job.completed","job_id":"`+id+`","status":"COMPLETED"}`, e2eSecret); code != http.StatusNoContent {
			t.Fatalf("delivery: %d, want 204", code)
		}
	}
	// serve records the secrets' last uses every minute and once more as
	// it stops.
	srv.signal(syscall.SIGTERM)
	<-srv.done

	h := newHook(t, http.StatusOK)
	out, errOut, code := runCLI(t, nil, "alert", "--db", db, "--quiet-for", "1h", "--config", cfg, "--notify", h.url())
	if code != 1 || !strings.HasPrefix(out, "quiet gh  never had a verified delivery") || strings.Count(out, "\n") != 1 || errOut != "" {
		t.Fatalf("--quiet-for 1h --config: exit %d, stdout %q, stderr %q; want 1 and gh alone", code, out, errOut)
	}
	if posts := h.posts(t); len(posts) != 1 || posts[0]["check"] != "quiet" || !strings.Contains(posts[0]["text"].(string), "quiet gh") {
		t.Errorf("notified %v, want one quiet notice naming gh", posts)
	}
	if out, _, code := runCLI(t, nil, "alert", "--db", db, "--quiet-for", "1h", "--source", "sume"); code != 0 || out != "" {
		t.Errorf("busy source: exit %d, stdout %q; want 0 and silence", code, out)
	}
	out, _, code = runCLI(t, nil, "alert", "--db", db, "--quiet-for", "1h", "--source", "gh", "--json")
	var q struct {
		Source string `json:"source"`
		Never  bool   `json:"never_verified"`
	}
	if code != 1 || json.Unmarshal([]byte(out), &q) != nil || q.Source != "gh" || !q.Never {
		t.Errorf("--json: exit %d, stdout %q; want 1 and gh never verified", code, out)
	}
	// Without --config: the sources verified on (and sume), so only
	// the busy one, quiet once the time asked has passed since it last
	// verified a delivery.
	waitFor(t, "sume quiet for 1s", func() bool {
		out, _, code := runCLI(t, nil, "alert", "--db", db, "--quiet-for", "1s")
		return code == 1 && strings.HasPrefix(out, "quiet sume  no verified delivery for ")
	})
	for _, args := range [][]string{
		{"--quiet-for", "0s"},
		{"--quiet-for", "1h", "--max-age", "1h"},
		{"--quiet-for", "1h", "--parked-every-hour", "24h"},
		{"--source", "sume"},
		{"--quiet-for", "soon"},
	} {
		if _, errOut, code := runCLI(t, nil, append([]string{"alert", "--db", db}, args...)...); code != 2 || !strings.HasPrefix(errOut, "inbox: ") {
			t.Errorf("%v: exit %d, stderr %q; want 2", args, code, errOut)
		}
	}
}
