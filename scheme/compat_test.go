package scheme_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"inbox/scheme"
)

// svixSign signs a message the way the svix library does (its
// Webhook.Sign): the key is the base64 after whsec_, the MAC the HMAC-SHA256
// of "<id>.<unix seconds>.<payload>", sent as "v1,<base64>"; with several
// secrets, one such entry per secret, space-separated. It is written here
// from the library's code rather than through scheme.SignStandard, so that
// the two are checked against each other.
func svixSign(t *testing.T, id string, ts time.Time, payload []byte, secrets ...string) string {
	t.Helper()
	var entries []string
	for _, secret := range secrets {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
		if err != nil {
			t.Fatal(err)
		}
		m := hmac.New(sha256.New, key)
		m.Write([]byte(fmt.Sprintf("%s.%d.%s", id, ts.Unix(), payload)))
		entries = append(entries, "v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
	}
	return strings.Join(entries, " ")
}

func svixHeaders(id, ts, sig string) http.Header {
	return header(scheme.HeaderSvixID, id, scheme.HeaderSvixTimestamp, ts, scheme.HeaderSvixSignature, sig)
}

// TestSvixHeaderNames checks that the standard-webhooks scheme takes
// deliveries under Svix's own header names (svix-id, svix-timestamp,
// svix-signature) as Svix's verifier does, signed as the svix library
// signs, and refuses a delivery that sends both sets of names.
func TestSvixHeaderNames(t *testing.T) {
	sw := scheme.StandardWebhooks{Tolerance: 5 * time.Minute}
	const other = "whsec_c2VjcmV0LWtleQ=="
	otherKey, err := scheme.StandardVerifyKey(other)
	if err != nil {
		t.Fatal(err)
	}
	keys := append(swKey(t), scheme.Secret{Key: otherKey})
	body := []byte(swBody)
	if got := svixSign(t, swID, swNow, body, swSecret); got != swSig {
		t.Fatalf("svixSign = %s, want the published %s", got, swSig)
	}
	ok := []struct {
		name   string
		h      http.Header
		secret int
	}{
		{"svix names, the published vector", svixHeaders(swID, "1614265330", swSig), 0},
		{"svix names, two secrets signed", svixHeaders(swID, "1614265330", svixSign(t, swID, swNow, body, other, swSecret)), 0},
		{"svix names, the second secret", svixHeaders(swID, "1614265330", svixSign(t, swID, swNow, body, other)), 1},
		{"svix names, another case", header("Svix-Id", swID, "SVIX-TIMESTAMP", "1614265330", "Svix-Signature", swSig), 0},
		{"webhook names still", swHeaders(swID, "1614265330", swSig), 0},
	}
	for _, tt := range ok {
		v, err := sw.Verify(tt.h, body, keys, swNow)
		if err != nil || v.Secret != tt.secret || v.TS != 1614265330 || !v.Signed {
			t.Errorf("%s: %+v, %v; want verified by secret %d", tt.name, v, err, tt.secret)
		}
		if id, _ := sw.Identify(tt.h, []byte(`{"type":"user.created"}`)); id.Key != swID || id.Event != "user.created" {
			t.Errorf("%s: Identify = %+v, want key %s", tt.name, id, swID)
		}
	}

	both := svixHeaders(swID, "1614265330", swSig)
	for k, v := range swHeaders(swID, "1614265330", swSig) {
		both[k] = v
	}
	refused := []struct {
		name string
		h    http.Header
		want error
	}{
		{"both sets, whole", both, scheme.ErrMalformedSignature},
		{"svix set and a webhook-id", func() http.Header {
			h := svixHeaders(swID, "1614265330", swSig)
			h.Add(scheme.HeaderWebhookID, "msg_other")
			return h
		}(), scheme.ErrMalformedSignature},
		{"svix id, webhook timestamp and signature", header(scheme.HeaderSvixID, swID, scheme.HeaderWebhookTimestamp, "1614265330", scheme.HeaderWebhookSignature, swSig), scheme.ErrMalformedSignature},
		{"svix names, two signature headers", func() http.Header {
			h := svixHeaders(swID, "1614265330", swSig)
			h.Add(scheme.HeaderSvixSignature, swSig)
			return h
		}(), scheme.ErrNoSignature},
		{"svix names, no id", header(scheme.HeaderSvixTimestamp, "1614265330", scheme.HeaderSvixSignature, swSig), scheme.ErrMalformedSignature},
		{"svix names, other id", svixHeaders("msg_other", "1614265330", swSig), scheme.ErrMismatch},
		{"svix names, stale", svixHeaders(swID, "1614264000", svixSign(t, swID, time.Unix(1614264000, 0), body, swSecret)), scheme.ErrStaleTimestamp},
	}
	for _, tt := range refused {
		_, err := sw.Verify(tt.h, body, keys, swNow)
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), swSig[3:]) {
			t.Errorf("%s: error text holds the MAC", tt.name)
		}
	}
	if id, _ := sw.Identify(both, body); id.Key != "" {
		t.Errorf("both sets: Identify key %q, want none", id.Key)
	}
}

// TestStripeOtherSchemes checks that entries of schemes other than v1 are
// skipped, as Stripe's documentation says and its libraries do (with
// entries that are no scheme at all, and malformed v1s), while every
// well-formed v1 entry is still tried and one is required.
func TestStripeOtherSchemes(t *testing.T) {
	st := scheme.Stripe{Tolerance: 5 * time.Minute}
	body := []byte(stripeBody)
	const other = "whsec_other"
	wrong := strings.Repeat("0", 64)
	for _, h := range []string{
		"t=1700000000,v2=" + stripeMAC + ",v1=" + stripeMAC,
		"t=1700000000,v1=" + stripeMAC + ",v2=not-hex-at-all",
		"v0=" + wrong + ",t=1700000000,v1=" + stripeMAC,
		"t=1700000000,v1=" + wrong + ",v3=x,v1=" + stripeMAC,
		"t=1700000000,v1=" + stripeMAC + ",v1=" + wrong,
		"t=1700000000,ed25519=abc,v1=" + stripeMAC,
		// What stripe-node's generateTestHeaderString makes and its
		// verifyHeader accepts: unknown names in any case, entries without
		// "=", empty ones, a malformed v1 beside the good one.
		"t=1700000000,V1=abc,v1=" + stripeMAC,
		"t=1700000000,foo,v1=" + stripeMAC,
		"t=1700000000,,v1=" + stripeMAC,
		",t=1700000000,v1=" + stripeMAC + ",",
		"t=1700000000,v1=abcd,v1=" + stripeMAC,
		"t=1700000000,v1=,v1=" + strings.ToUpper(stripeMAC) + ",v1=" + stripeMAC,
		"t=1700000000,v1=" + stripeMAC + "=,v1=" + stripeMAC,
	} {
		if _, err := st.Verify(header(scheme.HeaderStripeSignature, h), body, secrets(other, stripeSecret), stripeNow); err != nil {
			t.Errorf("%s: %v, want verified", h, err)
		}
	}
	for h, want := range map[string]error{
		"t=1700000000,v2=" + stripeMAC:                  scheme.ErrNoSignature,
		"t=1700000000,v2=" + stripeMAC + ",v1=" + wrong: scheme.ErrMismatch,
		"t=1700000000,V1=" + stripeMAC:                  scheme.ErrNoSignature,
		"t=1700000000,v1=" + stripeMAC[:63] + ",v2=1":   scheme.ErrMalformedSignature,
		"t=1700000000,v1=abcd,v1=" + wrong:              scheme.ErrMismatch,
		"t=1700000000,foo,,V1=" + stripeMAC:             scheme.ErrNoSignature,
		"foo,v1=" + stripeMAC:                           scheme.ErrBadTimestamp,
	} {
		_, err := st.Verify(header(scheme.HeaderStripeSignature, h), body, secrets(stripeSecret), stripeNow)
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", h, err, want)
		}
	}
}

// TestVibeSchema checks the payload rules reference 004 gives, past the
// field types: the run type, scheduledFor's exact form, the expected jobIds
// and members sent once.
func TestVibeSchema(t *testing.T) {
	expecting := scheme.Vibe{JobIDs: []string{"job_other", "job_vector"}}
	if id, err := expecting.Identify(nil, []byte(vibeBody)); err != nil || id.Key != "run_vector" {
		t.Errorf("an expected jobId: %+v, %v", id, err)
	}
	for _, good := range []string{
		strings.Replace(vibeBody, `2026-10-09T09:00:00.000Z`, `2024-02-29T23:59:59.999Z`, 1),
		strings.Replace(vibeBody, `"trigger":"schedule"`, `"trigger":"manual"`, 1),
	} {
		if _, err := (scheme.Vibe{}).Identify(nil, []byte(good)); err != nil {
			t.Errorf("%s: %v, want valid", good, err)
		}
	}
	replace := func(old, new string) string { return strings.Replace(vibeBody, old, new, 1) }
	for _, bad := range []string{
		replace(`"type":"scheduled_job.run"`, `"type":"scheduled_job.ran"`),
		replace(`"type":"scheduled_job.run"`, `"type":""`),
		replace(`2026-10-09T09:00:00.000Z`, `2026-10-09T09:00:00Z`),
		replace(`2026-10-09T09:00:00.000Z`, `2026-10-09T09:00:00.00Z`),
		replace(`2026-10-09T09:00:00.000Z`, `2026-10-09T09:00:00.0000Z`),
		replace(`2026-10-09T09:00:00.000Z`, `2026-10-09T09:00:00.000+00:00`),
		replace(`2026-10-09T09:00:00.000Z`, `2026-10-09T11:00:00.000+02:00`),
		replace(`2026-10-09T09:00:00.000Z`, `2026-10-09T09:00:00.000z`),
		replace(`2026-10-09T09:00:00.000Z`, `2026-10-09 09:00:00.000Z`),
		replace(`2026-10-09T09:00:00.000Z`, `2026-10-09T09:00:00.000`),
		replace(`2026-10-09T09:00:00.000Z`, `2026-13-09T09:00:00.000Z`),
		replace(`2026-10-09T09:00:00.000Z`, `2026-04-31T09:00:00.000Z`),
		replace(`2026-10-09T09:00:00.000Z`, `2025-02-29T09:00:00.000Z`),
		replace(`2026-10-09T09:00:00.000Z`, `2026-10-09T24:00:00.000Z`),
		replace(`2026-10-09T09:00:00.000Z`, `2026-10-09T09:00:60.000Z`),
		replace(`2026-10-09T09:00:00.000Z`, `+2026-10-09T09:00:00.000Z`),
		replace(`2026-10-09T09:00:00.000Z`, `1791536400`),
		replace(`"scheduledFor":"2026-10-09T09:00:00.000Z"`, `"scheduledFor":1791536400000`),
		replace(`"runId":"run_vector"`, `"runId":"run_vector","runId":"run_other"`),
		replace(`"jobId":"job_vector"`, `"jobId":"job_vector","jobId":"job_vector"`),
		vibeBody + `{}`,
		vibeBody + `]`,
	} {
		if _, err := (scheme.Vibe{}).Identify(nil, []byte(bad)); !errors.Is(err, scheme.ErrInvalidPayload) {
			t.Errorf("%s: %v, want invalid payload", bad, err)
		}
	}
	for _, ids := range [][]string{{"job_other"}, {"job_vecto"}, {"JOB_VECTOR"}} {
		if _, err := (scheme.Vibe{JobIDs: ids}).Identify(nil, []byte(vibeBody)); !errors.Is(err, scheme.ErrInvalidPayload) {
			t.Errorf("expecting %v: jobId job_vector: %v, want invalid payload", ids, err)
		}
	}
}

// TestVibeKey checks the Vibe secret's form: vjs_ and 43 unpadded base64url
// characters, used whole as the key; errors never show the secret.
func TestVibeKey(t *testing.T) {
	key, err := scheme.VibeKey(vibeSecret)
	if err != nil || string(key) != vibeSecret {
		t.Fatalf("VibeKey(reference) = %q, %v; want the whole secret", key, err)
	}
	suffix := strings.TrimPrefix(vibeSecret, "vjs_")
	for _, bad := range []string{
		"",
		"vjs_",
		"vjs_replace-with-your-vibe-secret",
		suffix,                                  // no prefix
		"VJS_" + suffix,                         // another prefix
		"whsec_" + suffix[:41],                  // another provider's
		vibeSecret[:46],                         // truncated
		vibeSecret + "A",                        // too long
		vibeSecret[:46] + "=",                   // padded
		vibeSecret[:45] + "+8",                  // standard base64, not url
		vibeSecret[:46] + "9",                   // bits past the 32 bytes
		vibeSecret[:20] + " " + vibeSecret[21:], // a space
		" " + vibeSecret[:46],
	} {
		_, err := scheme.VibeKey(bad)
		if err == nil {
			t.Errorf("VibeKey(%q) accepted", bad)
			continue
		}
		if len(bad) > 8 && strings.Contains(err.Error(), bad[4:]) {
			t.Errorf("VibeKey(%q): error shows the secret: %v", bad, err)
		}
	}
}
