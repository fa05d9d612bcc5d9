package scheme_test

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"inbox/inbox"
	"inbox/scheme"
)

// Published and constructed test vectors.
const (
	vibeSecret = "vjs_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"
	vibeHeader = "t=1791536400,v1=47f5954d1810b796a982c0eb461a948f4e80d531212cac1a4668321d24ea3008"
	vibeBody   = `{"type":"scheduled_job.run","jobId":"job_vector","runId":"run_vector","scheduledFor":"2026-10-09T09:00:00.000Z","attempt":1,"late":false,"trigger":"schedule"}`

	githubSecret = "It's a Secret to Everybody"
	githubHeader = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"

	swSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	swID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	swBody   = `{"test": 2432232314}`
	swSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

	// Stripe's scheme, computed independently (Python's hmac).
	stripeSecret = "whsec_test_secret"
	stripeBody   = `{"id":"evt_1","object":"event","type":"invoice.paid"}`
	stripeMAC    = "dfb4777aaaec4ea29ff455dd4df7fe6b2ef71096ad3a93a158db7e100109ea91"
)

var (
	vibeNow   = time.Unix(1791536400, 0)
	swNow     = time.Unix(1614265330, 0)
	stripeNow = time.Unix(1700000000, 0)
)

func secrets(keys ...string) []scheme.Secret {
	out := make([]scheme.Secret, len(keys))
	for i, k := range keys {
		out[i] = scheme.Secret{Key: []byte(k)}
	}
	return out
}

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func vibeHeaders(sig string) http.Header {
	return header(scheme.HeaderVibeCaller, "schedule", scheme.HeaderVibeSignature, sig)
}

func swKey(t *testing.T) []scheme.Secret {
	t.Helper()
	key, err := scheme.StandardKey(swSecret)
	if err != nil {
		t.Fatal(err)
	}
	return []scheme.Secret{{Key: key}}
}

func swHeaders(id, ts, sig string) http.Header {
	return header(scheme.HeaderWebhookID, id, scheme.HeaderWebhookTimestamp, ts, scheme.HeaderWebhookSignature, sig)
}

func TestVectors(t *testing.T) {
	hm, err := scheme.NewHMAC(scheme.HMACOptions{Header: "X-Signature", Prefix: "sha256=", Encoding: "hex",
		TimestampHeader: "X-Timestamp", Tolerance: time.Minute, KeyField: "id"})
	if err != nil {
		t.Fatal(err)
	}
	hm64, err := scheme.NewHMAC(scheme.HMACOptions{Header: "X-Signature", Encoding: "base64", KeyFrom: "sha256"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		s       scheme.Scheme
		h       http.Header
		body    string
		secrets []scheme.Secret
		now     time.Time
		wantTS  int64
	}{
		{"vibe", scheme.Vibe{}, vibeHeaders(vibeHeader), vibeBody, secrets(vibeSecret), vibeNow, 1791536400},
		{"github", scheme.GitHub{}, header(scheme.HeaderGitHubSignature, githubHeader), "Hello, World!", secrets(githubSecret), vibeNow, vibeNow.Unix()},
		{"standard-webhooks", scheme.StandardWebhooks{Tolerance: 5 * time.Minute}, swHeaders(swID, "1614265330", swSig), swBody, swKey(t), swNow, 1614265330},
		{"stripe", scheme.Stripe{Tolerance: 5 * time.Minute}, header(scheme.HeaderStripeSignature, "t=1700000000,v1="+stripeMAC), stripeBody, secrets(stripeSecret), stripeNow, 1700000000},
		{"stripe with v0 and a second v1", scheme.Stripe{Tolerance: 5 * time.Minute}, header(scheme.HeaderStripeSignature, "t=1700000000,v1="+strings.Repeat("0", 64)+",v1="+stripeMAC+",v0=abc"), stripeBody, secrets(stripeSecret), stripeNow, 1700000000},
		{"hmac hex, timestamped", hm, header("X-Signature", "sha256=3daa9d629d20de8814d8bd27d8f81fe749c833b5fc13f7bffd3b47699e5c83f9", "X-Timestamp", "1700000000"), `{"id":"ord_1","event":"order.paid"}`, secrets("topsecret"), stripeNow, 1700000000},
		{"hmac base64, body only", hm64, header("X-Signature", "0oXE+6k7DvRKa5jjE3EU9d5aiupd+5FViwgXTbBpCO0="), `{"id":"ord_1","event":"order.paid"}`, secrets("topsecret"), stripeNow, stripeNow.Unix()},
	}
	for _, tt := range tests {
		v, err := tt.s.Verify(tt.h, []byte(tt.body), tt.secrets, tt.now)
		if err != nil || v.TS != tt.wantTS || v.Secret != 0 {
			t.Errorf("%s: Verify = %+v, %v; want ts %d, secret 0", tt.name, v, err, tt.wantTS)
		}
	}
	if got := scheme.SignStandard(swKey(t)[0].Key, swID, 1614265330, []byte(swBody)); got != swSig {
		t.Errorf("SignStandard = %s, want %s", got, swSig)
	}
	if got := scheme.SignVibe(vibeSecret, 1791536400, []byte(vibeBody)); got != vibeHeader {
		t.Errorf("SignVibe = %s, want %s", got, vibeHeader)
	}
	if got := scheme.SignGitHub(githubSecret, []byte("Hello, World!")); got != githubHeader {
		t.Errorf("SignGitHub = %s, want %s", got, githubHeader)
	}
}

// TestVibeMutations checks that every single-character change of the
// reference vector's header and body (each character replaced by every
// other printable one, or deleted) fails to verify.
func TestVibeMutations(t *testing.T) {
	v := scheme.Vibe{}
	mutations := func(s string, check func(string)) {
		for i := range len(s) {
			check(s[:i] + s[i+1:])
			for c := byte(' '); c <= '~'; c++ {
				if c != s[i] {
					check(s[:i] + string(c) + s[i+1:])
				}
			}
		}
	}
	mutations(vibeHeader, func(h string) {
		if _, err := v.Verify(vibeHeaders(h), []byte(vibeBody), secrets(vibeSecret), vibeNow); err == nil {
			t.Errorf("mutated header %q verified", h)
		}
	})
	mutations(vibeBody, func(b string) {
		if _, err := v.Verify(vibeHeaders(vibeHeader), []byte(b), secrets(vibeSecret), vibeNow); err == nil {
			t.Errorf("mutated body %q verified", b)
		}
	})
}

func TestVibeStrictHeaders(t *testing.T) {
	v := scheme.Vibe{}
	mac := strings.TrimPrefix(vibeHeader, "t=1791536400,v1=")
	tests := []struct {
		name string
		h    http.Header
		want error
	}{
		{"no caller", header(scheme.HeaderVibeSignature, vibeHeader), scheme.ErrCaller},
		{"other caller", header(scheme.HeaderVibeCaller, "manual", scheme.HeaderVibeSignature, vibeHeader), scheme.ErrCaller},
		{"two callers", header(scheme.HeaderVibeCaller, "schedule", scheme.HeaderVibeCaller, "schedule", scheme.HeaderVibeSignature, vibeHeader), scheme.ErrCaller},
		{"no signature", header(scheme.HeaderVibeCaller, "schedule"), scheme.ErrNoSignature},
		{"two signature headers", header(scheme.HeaderVibeCaller, "schedule", scheme.HeaderVibeSignature, vibeHeader, scheme.HeaderVibeSignature, vibeHeader), scheme.ErrNoSignature},
		{"repeated t", vibeHeaders("t=1791536400,t=1791536400,v1=" + mac), scheme.ErrBadTimestamp},
		{"repeated v1", vibeHeaders(vibeHeader + ",v1=" + mac), scheme.ErrMalformedSignature},
		{"extra field", vibeHeaders(vibeHeader + ",v0=00"), scheme.ErrMalformedSignature},
		{"v1 first", vibeHeaders("v1=" + mac + ",t=1791536400"), scheme.ErrMalformedSignature},
		{"space", vibeHeaders("t=1791536400, v1=" + mac), scheme.ErrMalformedSignature},
		{"uppercase hex", vibeHeaders("t=1791536400,v1=" + strings.ToUpper(mac)), scheme.ErrMalformedSignature},
		{"leading zero", vibeHeaders("t=01791536400,v1=" + mac), scheme.ErrBadTimestamp},
		{"unsafe integer", vibeHeaders("t=9007199254740992,v1=" + mac), scheme.ErrBadTimestamp},
		{"17 digits", vibeHeaders("t=10000000000000000,v1=" + mac), scheme.ErrBadTimestamp},
		{"sign", vibeHeaders("t=+1791536400,v1=" + mac), scheme.ErrBadTimestamp},
	}
	for _, tt := range tests {
		_, err := v.Verify(tt.h, []byte(vibeBody), secrets(vibeSecret), vibeNow)
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), mac) {
			t.Errorf("%s: error text holds the MAC", tt.name)
		}
	}
}

func TestStrictHeaders(t *testing.T) {
	sw := scheme.StandardWebhooks{Tolerance: 5 * time.Minute}
	st := scheme.Stripe{Tolerance: 5 * time.Minute}
	gh := scheme.GitHub{}
	ghMAC := strings.TrimPrefix(githubHeader, "sha256=")
	stripeOK := "t=1700000000,v1=" + stripeMAC
	tests := []struct {
		name    string
		s       scheme.Scheme
		h       http.Header
		body    string
		secrets []scheme.Secret
		now     time.Time
		want    error
	}{
		{"github: none", gh, header(), "Hello, World!", secrets(githubSecret), vibeNow, scheme.ErrNoSignature},
		{"github: twice", gh, header(scheme.HeaderGitHubSignature, githubHeader, scheme.HeaderGitHubSignature, githubHeader), "Hello, World!", secrets(githubSecret), vibeNow, scheme.ErrNoSignature},
		{"github: no prefix", gh, header(scheme.HeaderGitHubSignature, ghMAC), "Hello, World!", secrets(githubSecret), vibeNow, scheme.ErrMalformedSignature},
		{"github: uppercase", gh, header(scheme.HeaderGitHubSignature, "sha256="+strings.ToUpper(ghMAC)), "Hello, World!", secrets(githubSecret), vibeNow, scheme.ErrMalformedSignature},
		{"github: trailing newline in body", gh, header(scheme.HeaderGitHubSignature, githubHeader), "Hello, World!\n", secrets(githubSecret), vibeNow, scheme.ErrMismatch},
		{"github: other secret", gh, header(scheme.HeaderGitHubSignature, githubHeader), "Hello, World!", secrets("other"), vibeNow, scheme.ErrMismatch},
		{"stripe: two headers", st, header(scheme.HeaderStripeSignature, stripeOK, scheme.HeaderStripeSignature, stripeOK), stripeBody, secrets(stripeSecret), stripeNow, scheme.ErrNoSignature},
		{"stripe: repeated t", st, header(scheme.HeaderStripeSignature, "t=1700000000,t=1700000000,v1="+stripeMAC), stripeBody, secrets(stripeSecret), stripeNow, scheme.ErrBadTimestamp},
		{"stripe: a later t", st, header(scheme.HeaderStripeSignature, stripeOK+",t=1700000001"), stripeBody, secrets(stripeSecret), stripeNow, scheme.ErrBadTimestamp},
		{"stripe: no t", st, header(scheme.HeaderStripeSignature, "v1="+stripeMAC), stripeBody, secrets(stripeSecret), stripeNow, scheme.ErrBadTimestamp},
		{"stripe: no v1", st, header(scheme.HeaderStripeSignature, "t=1700000000,v0="+stripeMAC), stripeBody, secrets(stripeSecret), stripeNow, scheme.ErrNoSignature},
		{"stripe: another scheme only", st, header(scheme.HeaderStripeSignature, "t=1700000000,v2="+stripeMAC), stripeBody, secrets(stripeSecret), stripeNow, scheme.ErrNoSignature},
		// As stripe-node and stripe-go read the header: an entry they skip
		// is skipped, so " v1" (a space) is no v1.
		{"stripe: an entry with no name", st, header(scheme.HeaderStripeSignature, stripeOK+",=00"), stripeBody, secrets(stripeSecret), stripeNow, nil},
		{"stripe: an entry with no =", st, header(scheme.HeaderStripeSignature, stripeOK+",v2"), stripeBody, secrets(stripeSecret), stripeNow, nil},
		{"stripe: space", st, header(scheme.HeaderStripeSignature, "t=1700000000, v1="+stripeMAC), stripeBody, secrets(stripeSecret), stripeNow, scheme.ErrNoSignature},
		{"stripe: short v1", st, header(scheme.HeaderStripeSignature, stripeOK[:len(stripeOK)-2]), stripeBody, secrets(stripeSecret), stripeNow, scheme.ErrMalformedSignature},
		{"stripe: re-serialized body", st, header(scheme.HeaderStripeSignature, stripeOK), `{"id": "evt_1", "object": "event", "type": "invoice.paid"}`, secrets(stripeSecret), stripeNow, scheme.ErrMismatch},
		{"standard: two ids", sw, header(scheme.HeaderWebhookID, swID, scheme.HeaderWebhookID, swID, scheme.HeaderWebhookTimestamp, "1614265330", scheme.HeaderWebhookSignature, swSig), swBody, swKey(t), swNow, scheme.ErrMalformedSignature},
		{"standard: two signature headers", sw, header(scheme.HeaderWebhookID, swID, scheme.HeaderWebhookTimestamp, "1614265330", scheme.HeaderWebhookSignature, swSig, scheme.HeaderWebhookSignature, swSig), swBody, swKey(t), swNow, scheme.ErrNoSignature},
		{"standard: two timestamps", sw, header(scheme.HeaderWebhookID, swID, scheme.HeaderWebhookTimestamp, "1614265330", scheme.HeaderWebhookTimestamp, "1614265330", scheme.HeaderWebhookSignature, swSig), swBody, swKey(t), swNow, scheme.ErrBadTimestamp},
		{"standard: double space", sw, swHeaders(swID, "1614265330", "v1,AAAA  "+swSig), swBody, swKey(t), swNow, scheme.ErrMalformedSignature},
		{"standard: no comma", sw, swHeaders(swID, "1614265330", "v1"), swBody, swKey(t), swNow, scheme.ErrMalformedSignature},
		{"standard: bad base64", sw, swHeaders(swID, "1614265330", "v1,!!"), swBody, swKey(t), swNow, scheme.ErrMalformedSignature},
		{"standard: only v1a", sw, swHeaders(swID, "1614265330", "v1a,AAAA"), swBody, swKey(t), swNow, scheme.ErrNoSignature},
		{"standard: leading zero", sw, swHeaders(swID, "01614265330", swSig), swBody, swKey(t), swNow, scheme.ErrBadTimestamp},
		{"standard: other id", sw, swHeaders("msg_other", "1614265330", swSig), swBody, swKey(t), swNow, scheme.ErrMismatch},
	}
	for _, tt := range tests {
		_, err := tt.s.Verify(tt.h, []byte(tt.body), tt.secrets, tt.now)
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
		for _, mac := range []string{ghMAC, stripeMAC, swSig[3:]} {
			if err != nil && strings.Contains(err.Error(), mac) {
				t.Errorf("%s: error text holds the MAC", tt.name)
			}
		}
	}
}

// TestClock checks each timestamped scheme at its tolerance either way
// (accepted) and a second beyond (refused).
func TestClock(t *testing.T) {
	const tol = 5 * time.Minute
	hm, err := scheme.NewHMAC(scheme.HMACOptions{Header: "X-Signature", Encoding: "hex", TimestampHeader: "X-Timestamp", Tolerance: tol, KeyHeader: "X-Id"})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"id":"x","type":"t"}`)
	const secret = "whsec_" + "c2VjcmV0LWtleQ==" // a Standard Webhooks secret; the others take it as bytes
	swk, err := scheme.StandardKey(secret)
	if err != nil {
		t.Fatal(err)
	}
	schemes := []struct {
		s       scheme.Scheme
		tol     time.Duration
		keys    []scheme.Secret
		headers func(ts int64) http.Header
	}{
		{scheme.Vibe{}, scheme.VibeTolerance, secrets(secret), func(ts int64) http.Header {
			return vibeHeaders(scheme.SignVibe(secret, ts, body))
		}},
		{scheme.Stripe{Tolerance: tol}, tol, secrets(secret), func(ts int64) http.Header {
			return header(scheme.HeaderStripeSignature, scheme.SignStripe(ts, body, secret))
		}},
		{scheme.StandardWebhooks{Tolerance: tol}, tol, []scheme.Secret{{Key: swk}}, func(ts int64) http.Header {
			return swHeaders("msg_1", strconv.FormatInt(ts, 10), scheme.SignStandard(swk, "msg_1", ts, body))
		}},
		{hm, tol, secrets(secret), func(ts int64) http.Header {
			return header("X-Signature", hm.Sign(secret, ts, body), "X-Timestamp", strconv.FormatInt(ts, 10))
		}},
	}
	now := time.Unix(1_800_000_000, 0)
	for _, sc := range schemes {
		edge := int64(sc.tol / time.Second)
		for _, d := range []int64{-edge, edge, 0} {
			if _, err := sc.s.Verify(sc.headers(now.Unix()+d), body, sc.keys, now); err != nil {
				t.Errorf("%s: %+ds: %v, want verified", sc.s.Name(), d, err)
			}
		}
		for _, d := range []int64{-edge - 1, edge + 1} {
			if _, err := sc.s.Verify(sc.headers(now.Unix()+d), body, sc.keys, now); !errors.Is(err, scheme.ErrStaleTimestamp) {
				t.Errorf("%s: %+ds: %v, want stale", sc.s.Name(), d, err)
			}
		}
	}
}

// TestRotation checks that either of two secrets verifies and is told
// apart, and that an expired secret stops verifying on its own.
func TestRotation(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"id":"evt_9","type":"x"}`)
	keys := []scheme.Secret{{Key: []byte("old"), Expires: now.Add(time.Minute)}, {Key: []byte("new")}}
	st := scheme.Stripe{Tolerance: time.Hour}
	for i, secret := range []string{"old", "new"} {
		h := header(scheme.HeaderStripeSignature, scheme.SignStripe(now.Unix(), body, secret))
		v, err := st.Verify(h, body, keys, now)
		if err != nil || v.Secret != i {
			t.Errorf("signed with %s: %+v, %v; want secret %d", secret, v, err, i)
		}
	}
	later := now.Add(time.Minute)
	h := header(scheme.HeaderStripeSignature, scheme.SignStripe(later.Unix(), body, "old"))
	if _, err := st.Verify(h, body, keys, later); !errors.Is(err, scheme.ErrMismatch) {
		t.Errorf("expired secret: %v, want mismatch", err)
	}
	// Both entries during a roll: the live one matches.
	h = header(scheme.HeaderStripeSignature, scheme.SignStripe(later.Unix(), body, "old", "new"))
	if v, err := st.Verify(h, body, keys, later); err != nil || v.Secret != 1 {
		t.Errorf("two entries after expiry: %+v, %v; want the new secret", v, err)
	}
	gh := scheme.GitHub{}
	h = header(scheme.HeaderGitHubSignature, scheme.SignGitHub("old", body))
	if _, err := gh.Verify(h, body, keys, later); !errors.Is(err, scheme.ErrMismatch) {
		t.Errorf("github, expired secret: %v, want mismatch", err)
	}
	if keys[0].Fingerprint() == keys[1].Fingerprint() || len(keys[0].Fingerprint()) != 8 {
		t.Errorf("fingerprints %s %s", keys[0].Fingerprint(), keys[1].Fingerprint())
	}
}

func TestVibeIdentify(t *testing.T) {
	id, err := scheme.Vibe{}.Identify(nil, []byte(vibeBody))
	if err != nil || id.Key != "run_vector" || id.Event != "scheduled_job.run" || string(id.Response) != `{"accepted":true}` {
		t.Errorf("vector: %+v, %v", id, err)
	}
	for _, bad := range []string{
		``, `null`, `[]`, `not json`,
		strings.Replace(vibeBody, `"runId":"run_vector",`, ``, 1),
		strings.Replace(vibeBody, `"run_vector"`, `""`, 1),
		strings.Replace(vibeBody, `"run_vector"`, `7`, 1),
		strings.Replace(vibeBody, `"runId"`, `"RunId"`, 1),
		strings.Replace(vibeBody, `"attempt":1`, `"attempt":5`, 1),
		strings.Replace(vibeBody, `"attempt":1`, `"attempt":1.0`, 1),
		strings.Replace(vibeBody, `"attempt":1`, `"attempt":"1"`, 1),
		strings.Replace(vibeBody, `"late":false`, `"late":0`, 1),
		strings.Replace(vibeBody, `"trigger":"schedule"`, `"trigger":"cron"`, 1),
		strings.Replace(vibeBody, `"jobId":"job_vector"`, `"jobId":null`, 1),
		"{\"runId\":\"\xff\"}",
	} {
		if _, err := (scheme.Vibe{}).Identify(nil, []byte(bad)); !errors.Is(err, scheme.ErrInvalidPayload) {
			t.Errorf("%q: %v, want invalid payload", bad, err)
		}
	}
}

func TestIdentify(t *testing.T) {
	id, _ := scheme.GitHub{}.Identify(header(scheme.HeaderGitHubDelivery, "d-1", scheme.HeaderGitHubEvent, "push"), nil)
	if id.Key != "d-1" || id.Event != "push" {
		t.Errorf("github: %+v", id)
	}
	id, _ = scheme.GitHub{}.Identify(header(scheme.HeaderGitHubDelivery, "d-1", scheme.HeaderGitHubDelivery, "d-2"), nil)
	if id.Key != "" {
		t.Errorf("github, two delivery ids: key %q, want none", id.Key)
	}
	id, _ = scheme.Stripe{}.Identify(nil, []byte(stripeBody))
	if id.Key != "evt_1" || id.Event != "invoice.paid" {
		t.Errorf("stripe: %+v", id)
	}
	id, _ = scheme.StandardWebhooks{}.Identify(swHeaders(swID, "1", swSig), []byte(`{"type":"user.created"}`))
	if id.Key != swID || id.Event != "user.created" {
		t.Errorf("standard-webhooks: %+v", id)
	}
	hm, _ := scheme.NewHMAC(scheme.HMACOptions{Header: "X", Encoding: "hex", KeyFrom: "sha256", EventHeader: "X-Event"})
	id, _ = hm.Identify(header("X-Event", "e"), []byte("{}"))
	if !hm.KeysByBody() || id.Key != "" || id.Event != "e" {
		t.Errorf("hmac: %+v, want the body's sum as the key", id)
	}
	// The key is the body's sum, which Classify keys the row by: stored,
	// never parked missing_key.
	d := inbox.Classify("src", id.Named(), []byte("{}"), 1, scheme.Rules(hm, inbox.Rules{}))
	if d.Key != "src/sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a" || d.Status != inbox.StatusNew {
		t.Errorf("hmac key_from sha256 classified as %s %s %s", d.Key, d.Status, d.Reason)
	}
	for _, o := range []scheme.HMACOptions{
		{Encoding: "hex", KeyFrom: "sha256"},
		{Header: "X", Encoding: "hex"},
		{Header: "X", Encoding: "b32", KeyFrom: "sha256"},
		{Header: "X", Encoding: "hex", KeyField: "id", KeyHeader: "X-Id"},
		{Header: "X", Encoding: "hex", KeyFrom: "sha256", TimestampHeader: "X-T"},
	} {
		if _, err := scheme.NewHMAC(o); err == nil {
			t.Errorf("NewHMAC(%+v) accepted", o)
		}
	}
}

func TestStandardKey(t *testing.T) {
	for secret, want := range map[string]string{
		"":                       "",
		"whsec_c2VjcmV0LWtleQ==": "secret-key",
	} {
		got, err := scheme.StandardKey(secret)
		if err != nil || string(got) != want {
			t.Errorf("StandardKey(%q) = %q, %v; want %q", secret, got, err, want)
		}
	}
	// Without the prefix a secret is refused, even one that is base64: the
	// specification's libraries would decode it, raw bytes would not match.
	for _, bad := range []string{"whsec_", "whsec_not base64!", "plain secret", "c2VjcmV0LWtleQ==", "whsec_c2VjcmV0LWtleQ"} {
		if _, err := scheme.StandardKey(bad); err == nil {
			t.Errorf("StandardKey(%q) accepted", bad)
		}
	}
}
