package receiver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"inbox/inbox"
	"inbox/scheme"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

const vibeSecret = "vjs_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"

const vibeBody = `{"type":"scheduled_job.run","jobId":"job_vector","runId":"run_vector","scheduledFor":"2026-10-09T09:00:00.000Z","attempt":1,"late":false,"trigger":"schedule"}`

func sourceHandler(t *testing.T, store *sqlite.Store, cfg Config) *Handler {
	t.Helper()
	cfg.Now = func() time.Time { return testNow }
	if cfg.HardCap == 0 {
		cfg.HardCap = testHardCap
	}
	h, err := NewHandler(store, cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func serve(h *Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestVibeSource runs Vibe's contract through the real handler on a real
// SQLite file: 202 with the saved body, the same answer to a later attempt
// of the run, 413 above 64 KiB, 401 for a bad signature or caller, 400 for
// an invalid payload, and nothing stored but the accepted run.
func TestVibeSource(t *testing.T) {
	t.Parallel()
	store := sqlitetest.MustOpen(t, sqlite.Options{})
	h := sourceHandler(t, store, Config{Source: "vibe", Scheme: scheme.Vibe{}, HardCap: scheme.VibeMaxBody, Accepted: 202,
		Keys: []scheme.Secret{{Key: []byte("vjs_old"), Expires: testNow}, {Key: []byte(vibeSecret)}}})
	req := func(body, secret, caller string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/webhooks/vibe", strings.NewReader(body))
		r.Header.Set(scheme.HeaderVibeCaller, caller)
		r.Header.Set(scheme.HeaderVibeSignature, scheme.SignVibe(secret, testNow.Unix(), []byte(body)))
		return r
	}
	w := serve(h, req(vibeBody, vibeSecret, "schedule"))
	if w.Code != 202 || w.Body.String() != `{"accepted":true}` {
		t.Fatalf("accepted run: %d %q", w.Code, w.Body)
	}
	second := strings.Replace(vibeBody, `"attempt":1`, `"attempt":2`, 1)
	if w := serve(h, req(second, vibeSecret, "schedule")); w.Code != 202 || w.Body.String() != `{"accepted":true}` {
		t.Errorf("second attempt: %d %q, want the saved answer", w.Code, w.Body)
	}
	big := `{"pad":"` + strings.Repeat("x", scheme.VibeMaxBody) + `"}`
	for name, tt := range map[string]struct {
		r    *http.Request
		want int
	}{
		"too large":      {req(big, vibeSecret, "schedule"), 413},
		"expired secret": {req(vibeBody, "vjs_old", "schedule"), 401},
		"other caller":   {req(vibeBody, vibeSecret, "api"), 401},
		"not json":       {req("nope", vibeSecret, "schedule"), 400},
		"no runId":       {req(strings.Replace(vibeBody, `"runId":"run_vector",`, ``, 1), vibeSecret, "schedule"), 400},
	} {
		if w := serve(h, tt.r); w.Code != tt.want {
			t.Errorf("%s: %d, want %d", name, w.Code, tt.want)
		}
	}
	e, err := store.Get(context.Background(), "vibe/run_vector")
	if err != nil {
		t.Fatal(err)
	}
	if e.Source != "vibe" || e.Deliveries != 2 || string(e.Body) != vibeBody || e.DeliveryTS != testNow.Unix() {
		t.Errorf("row: %+v", e)
	}
	if rows, _ := store.List(context.Background(), inbox.Filter{}); len(rows) != 1 {
		t.Errorf("%d rows, want the accepted run's only", len(rows))
	}
	uses := h.SecretUses()
	if len(uses) != 1 || uses[0].Fingerprint != (scheme.Secret{Key: []byte(vibeSecret)}).Fingerprint() {
		t.Errorf("secret uses: %+v, want the live secret's", uses)
	}
}

// TestKeyedSources stores deliveries of GitHub, Standard Webhooks, Stripe
// and a generic HMAC source through the real handler: each keyed as its
// scheme says, answered with the source's status, a repeat counted on the
// row, a forgery refused.
func TestKeyedSources(t *testing.T) {
	t.Parallel()
	store := sqlitetest.MustOpen(t, sqlite.Options{})
	swKey := []byte("0123456789abcdef0123456789abcdef")
	hm, err := scheme.NewHMAC(scheme.HMACOptions{Header: "X-Sig", Encoding: "base64", KeyHeader: "X-Id", EventField: "kind"})
	if err != nil {
		t.Fatal(err)
	}
	ts := strconv.FormatInt(testNow.Unix(), 10)
	tests := []struct {
		source string
		s      scheme.Scheme
		key    []byte
		body   string
		sign   func(r *http.Request, body string)
		wantID string
	}{
		{"gh", scheme.GitHub{}, []byte("ghs"), `{"zen":"x"}`, func(r *http.Request, body string) {
			r.Header.Set(scheme.HeaderGitHubSignature, scheme.SignGitHub("ghs", []byte(body)))
			r.Header.Set(scheme.HeaderGitHubDelivery, "d-1")
			r.Header.Set(scheme.HeaderGitHubEvent, "push")
		}, "gh/d-1"},
		{"sw", scheme.StandardWebhooks{Tolerance: time.Minute}, swKey, `{"type":"user.created"}`, func(r *http.Request, body string) {
			r.Header.Set(scheme.HeaderWebhookID, "msg_1")
			r.Header.Set(scheme.HeaderWebhookTimestamp, ts)
			r.Header.Set(scheme.HeaderWebhookSignature, scheme.SignStandard(swKey, "msg_1", testNow.Unix(), []byte(body)))
		}, "sw/msg_1"},
		{"stripe", scheme.Stripe{Tolerance: time.Minute}, []byte("whsec_s"), `{"id":"evt_1","type":"invoice.paid"}`, func(r *http.Request, body string) {
			r.Header.Set(scheme.HeaderStripeSignature, scheme.SignStripe(testNow.Unix(), []byte(body), "whsec_s"))
		}, "stripe/evt_1"},
		{"custom", hm, []byte("k"), `{"kind":"order.paid"}`, func(r *http.Request, body string) {
			r.Header.Set("X-Sig", hm.Sign("k", 0, []byte(body)))
			r.Header.Set("X-Id", "o-1")
		}, "custom/o-1"},
	}
	for _, tt := range tests {
		h := sourceHandler(t, store, Config{Source: tt.source, Scheme: tt.s, Keys: []scheme.Secret{{Key: tt.key}}, Accepted: 200})
		req := func(body string) *http.Request {
			r := httptest.NewRequest(http.MethodPost, "/webhooks/"+tt.source, strings.NewReader(body))
			tt.sign(r, body)
			return r
		}
		for range 2 {
			if w := serve(h, req(tt.body)); w.Code != 200 || w.Body.Len() != 0 {
				t.Errorf("%s: %d %q, want 200 and no body", tt.source, w.Code, w.Body)
			}
		}
		forged := req(tt.body)
		forged.Body = http.NoBody
		if w := serve(h, forged); w.Code != 401 || w.Header().Get("WWW-Authenticate") != tt.s.Name()+` realm="webhooks"` {
			t.Errorf("%s: forged: %d %q, want 401", tt.source, w.Code, w.Header().Get("WWW-Authenticate"))
		}
		e, err := store.Get(context.Background(), tt.wantID)
		if err != nil {
			t.Errorf("%s: %v", tt.source, err)
			continue
		}
		if e.Source != tt.source || e.Status != inbox.StatusNew || e.Deliveries != 2 || string(e.Body) != tt.body || e.Event == "" {
			t.Errorf("%s: row %+v", tt.source, e)
		}
	}
}

// TestSkewReported checks that OnSkew hears, per verified delivery whose
// scheme signs a timestamp, how far its receipt is past that timestamp,
// and hears nothing of a delivery that failed verification or of a scheme
// that signs no time (GitHub).
func TestSkewReported(t *testing.T) {
	t.Parallel()
	store := sqlitetest.MustOpen(t, sqlite.Options{})
	var skews []time.Duration
	record := func(d time.Duration) { skews = append(skews, d) }
	sumeH := sourceHandler(t, store, Config{Scheme: scheme.Sume{Tolerance: 5 * time.Minute}, Keys: keys(testSecret), Rules: inbox.Rules{Events: []string{"job.completed"}}, OnSkew: record})
	ghH := sourceHandler(t, store, Config{Source: "gh", Scheme: scheme.GitHub{}, Keys: keys(testSecret), Accepted: 200, OnSkew: record})
	for _, tt := range []struct {
		r    *http.Request
		want int
	}{
		{signedRequest(strings.Replace(completed, "job_1", "job_late", 1), testNow.Add(-90*time.Second), testSecret), 204},
		{signedRequest(strings.Replace(completed, "job_1", "job_early", 1), testNow.Add(40*time.Second), testSecret), 204},
		{signedRequest(completed, testNow.Add(-90*time.Second), "forged"), 401},
		{signedRequest(completed, testNow.Add(-10*time.Minute), testSecret), 401},
	} {
		if w := serve(sumeH, tt.r); w.Code != tt.want {
			t.Fatalf("sume: %d, want %d", w.Code, tt.want)
		}
	}
	r := httptest.NewRequest(http.MethodPost, "/webhooks/gh", strings.NewReader(`{}`))
	r.Header.Set(scheme.HeaderGitHubSignature, scheme.SignGitHub(testSecret, []byte(`{}`)))
	r.Header.Set(scheme.HeaderGitHubDelivery, "d-1")
	if w := serve(ghH, r); w.Code != 200 {
		t.Fatalf("github: %d, want 200", w.Code)
	}
	if want := []time.Duration{90 * time.Second, -40 * time.Second}; len(skews) != 2 || skews[0] != want[0] || skews[1] != want[1] {
		t.Errorf("skews = %v, want %v: the verified Sume deliveries only", skews, want)
	}
}
