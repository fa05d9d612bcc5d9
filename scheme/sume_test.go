package scheme_test

import (
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"inbox/scheme"
	"inbox/sume"
)

const (
	testSecret  = "whsec_current_0123456789"
	otherSecret = "whsec_previous_9876543210"
)

var sumeNow = time.Unix(1_800_000_000, 0)

// sumeVerify verifies as serve does a Sume delivery with these headers
// (a header left out when empty) under the secrets, at now.
func sumeVerify(timestamp, signature string, body []byte, secrets []string, tolerance time.Duration, now time.Time) (int64, error) {
	h := http.Header{}
	if timestamp != "" {
		h.Set(sume.HeaderTimestamp, timestamp)
	}
	if signature != "" {
		h.Set(sume.HeaderSignature, signature)
	}
	keys := make([]scheme.Secret, len(secrets))
	for i, s := range secrets {
		keys[i] = scheme.Secret{Key: []byte(s)}
	}
	v, err := scheme.Sume{Tolerance: tolerance}.Verify(h, body, keys, now)
	return v.TS, err
}

// TestSumeVerify checks Sume's verifier, the one every Sume delivery
// goes through.
func TestSumeVerify(t *testing.T) {
	body := []byte(`{"event":"job.completed","job_id":"job_1","status":"COMPLETED"}`)
	ts := strconv.FormatInt(sumeNow.Unix(), 10)
	good := sume.SignatureHeader(ts, body, testSecret)
	mac := hex.EncodeToString(sume.Sign(testSecret, ts, body))
	at := func(d time.Duration) string { return strconv.FormatInt(sumeNow.Add(d).Unix(), 10) }

	tests := []struct {
		name      string
		ts        string
		sig       string
		body      []byte
		secrets   []string
		tolerance time.Duration
		want      error
	}{
		{name: "valid", ts: ts, sig: good, want: nil},
		{name: "rotation: valid entry first", ts: ts, sig: good + "," + sume.SignatureHeader(ts, body, "stale"), want: nil},
		{name: "rotation: valid entry last", ts: ts, sig: sume.SignatureHeader(ts, body, "stale") + ", " + good, want: nil},
		{name: "rotation: second configured secret", ts: ts, sig: sume.SignatureHeader(ts, body, otherSecret), secrets: []string{testSecret, otherSecret}},
		{name: "other scheme entries are skipped", ts: ts, sig: "sume-v2=abc," + good},
		{name: "wrong secret", ts: ts, sig: sume.SignatureHeader(ts, body, otherSecret), want: sume.ErrMismatch},
		{name: "tampered body", ts: ts, sig: good, body: append([]byte{' '}, body...), want: sume.ErrMismatch},
		{name: "re-serialized JSON", ts: ts, sig: sume.SignatureHeader(ts, []byte(`{"event": "job.completed", "job_id": "job_1", "status": "COMPLETED"}`), testSecret), want: sume.ErrMismatch},
		{name: "signature for another timestamp", ts: at(time.Second), sig: good, want: sume.ErrMismatch},
		{name: "missing header", ts: ts, sig: "", want: sume.ErrNoSignature},
		{name: "no sume-v1 entry", ts: ts, sig: "v1=" + mac, want: sume.ErrNoSignature},
		{name: "empty sume-v1 entry", ts: ts, sig: "sume-v1=", want: sume.ErrMalformedSignature},
		{name: "63 hex characters", ts: ts, sig: "sume-v1=" + mac[:63], want: sume.ErrMalformedSignature},
		{name: "65 hex characters", ts: ts, sig: "sume-v1=" + mac + "0", want: sume.ErrMalformedSignature},
		{name: "uppercase hex", ts: ts, sig: "sume-v1=" + strings.ToUpper(mac), want: sume.ErrMalformedSignature},
		{name: "not hex", ts: ts, sig: "sume-v1=" + strings.Repeat("g", 64), want: sume.ErrMalformedSignature},
		{name: "malformed entry beside a valid one", ts: ts, sig: good + ",sume-v1=zz", want: sume.ErrMalformedSignature},
		{name: "timestamp missing", ts: "", sig: good, want: sume.ErrBadTimestamp},
		{name: "timestamp with sign", ts: "+" + ts, sig: good, want: sume.ErrBadTimestamp},
		{name: "timestamp with leading zero", ts: "0" + ts, sig: good, want: sume.ErrBadTimestamp},
		{name: "timestamp with space", ts: ts + " ", sig: good, want: sume.ErrBadTimestamp},
		{name: "timestamp in milliseconds is stale", ts: ts + "000", sig: good, want: sume.ErrStaleTimestamp},
		{name: "timestamp decimal", ts: ts + ".0", sig: good, want: sume.ErrBadTimestamp},
		{name: "timestamp overflow", ts: strings.Repeat("9", 30), sig: good, want: sume.ErrBadTimestamp},
		{name: "past, tolerance minus 1s", ts: at(-4*time.Minute - 59*time.Second), sig: sume.SignatureHeader(at(-299*time.Second), body, testSecret), want: nil},
		{name: "past, exactly tolerance", ts: at(-5 * time.Minute), sig: sume.SignatureHeader(at(-5*time.Minute), body, testSecret), want: nil},
		{name: "past, tolerance plus 1s", ts: at(-301 * time.Second), sig: sume.SignatureHeader(at(-301*time.Second), body, testSecret), want: sume.ErrStaleTimestamp},
		{name: "future, tolerance minus 1s", ts: at(299 * time.Second), sig: sume.SignatureHeader(at(299*time.Second), body, testSecret), want: nil},
		{name: "future, tolerance plus 1s", ts: at(301 * time.Second), sig: sume.SignatureHeader(at(301*time.Second), body, testSecret), want: sume.ErrStaleTimestamp},
		{name: "custom tolerance", ts: at(-61 * time.Second), sig: sume.SignatureHeader(at(-61*time.Second), body, testSecret), tolerance: time.Minute, want: sume.ErrStaleTimestamp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := body
			if tt.body != nil {
				b = tt.body
			}
			secrets := tt.secrets
			if secrets == nil {
				secrets = []string{testSecret}
			}
			tol := tt.tolerance
			if tol == 0 {
				tol = 5 * time.Minute
			}
			got, err := sumeVerify(tt.ts, tt.sig, b, secrets, tol, sumeNow)
			if !errors.Is(err, tt.want) {
				t.Fatalf("sumeVerify() error = %v, want %v", err, tt.want)
			}
			if err == nil && strconv.FormatInt(got, 10) != tt.ts {
				t.Errorf("sumeVerify() timestamp = %d, want %s", got, tt.ts)
			}
			if err != nil {
				for _, secret := range append(secrets, testSecret, otherSecret) {
					want := hex.EncodeToString(sume.Sign(secret, tt.ts, b))
					if strings.Contains(err.Error(), want) || strings.Contains(err.Error(), secret) {
						t.Errorf("error text %q holds a MAC or a secret", err)
					}
				}
				if strings.Contains(err.Error(), string(b)) {
					t.Errorf("error text %q holds the body", err)
				}
			}
		})
	}
}

// FuzzSumeVerify checks the verifier on any timestamp, header, body and
// secret: a header the provider would send for the body verifies, the same
// header over other bytes or under another secret does not, no error text
// holds a MAC or the secret, and nothing verifies without a matching entry.
func FuzzSumeVerify(f *testing.F) {
	f.Add("1800000000", "", []byte(`{"event":"job.completed","job_id":"job_1"}`), testSecret, int64(0))
	f.Add("1800000000", "sume-v1=00", []byte(``), testSecret, int64(-300))
	f.Add("01800000000", "v0=1", []byte(`not json`), "s", int64(299))
	f.Add("+1800000000", "sume-v1="+strings.Repeat("a", 64), []byte{0xff, 0}, otherSecret, int64(1<<62))
	f.Fuzz(func(t *testing.T, timestamp, header string, body []byte, secret string, skew int64) {
		const tolerance = 5 * time.Minute
		secrets := []string{secret}

		// Any input: no panic, only the verifier's errors, and a success
		// only when an entry is the MAC of these bytes at this timestamp.
		ts, err := sumeVerify(timestamp, header, body, secrets, tolerance, sumeNow)
		want := hex.EncodeToString(sume.Sign(secret, timestamp, body))
		switch {
		case err == nil:
			if !strings.Contains(header, "sume-v1="+want) {
				t.Fatalf("verified without an entry that matches")
			}
			if strconv.FormatInt(ts, 10) != timestamp {
				t.Fatalf("timestamp %d from %q", ts, timestamp)
			}
		case !errors.Is(err, sume.ErrNoSignature) && !errors.Is(err, sume.ErrMalformedSignature) &&
			!errors.Is(err, sume.ErrBadTimestamp) && !errors.Is(err, sume.ErrStaleTimestamp) && !errors.Is(err, sume.ErrMismatch):
			t.Fatalf("error %v is not one of the verifier's", err)
		case strings.Contains(err.Error(), want) || (len(secret) >= 8 && strings.Contains(err.Error(), secret)):
			t.Fatalf("error text %q holds the MAC or the secret", err)
		}

		// What the provider sends, at a time within the tolerance, verifies.
		at := sumeNow.Add(time.Duration(skew%int64(tolerance/time.Second)) * time.Second)
		fresh := strconv.FormatInt(at.Unix(), 10)
		sent := sume.SignatureHeader(fresh, body, secret)
		if _, err := sumeVerify(fresh, sent, body, secrets, tolerance, sumeNow); err != nil {
			t.Fatalf("the provider's own signature failed: %v", err)
		}
		if _, err := sumeVerify(fresh, header+","+sent, body, append(secrets, "other"), tolerance, sumeNow); err != nil &&
			!errors.Is(err, sume.ErrMalformedSignature) {
			t.Fatalf("a valid entry after others failed: %v", err)
		}
		// The same header over other bytes, or checked with another secret,
		// does not.
		if _, err := sumeVerify(fresh, sent, append(body, '\n'), secrets, tolerance, sumeNow); !errors.Is(err, sume.ErrMismatch) {
			t.Fatalf("a changed body: %v, want sume.ErrMismatch", err)
		}
		if _, err := sumeVerify(fresh, sent, body, []string{secret + "x"}, tolerance, sumeNow); !errors.Is(err, sume.ErrMismatch) {
			t.Fatalf("another secret: %v, want sume.ErrMismatch", err)
		}
	})
}

// TestSumeErrorsAreSchemeErrors checks that each Sume failure is the
// scheme error of its cause too, the one set the receiver maps to a
// status, and still reads as Sume's in the log.
func TestSumeErrorsAreSchemeErrors(t *testing.T) {
	body := []byte(`{}`)
	ts := strconv.FormatInt(sumeNow.Unix(), 10)
	for _, tt := range []struct {
		ts, sig  string
		sume, as error
		secrets  []string
	}{
		{ts, "", sume.ErrNoSignature, scheme.ErrNoSignature, []string{testSecret}},
		{ts, "sume-v1=00", sume.ErrMalformedSignature, scheme.ErrMalformedSignature, []string{testSecret}},
		{"01", sume.SignatureHeader(ts, body, testSecret), sume.ErrBadTimestamp, scheme.ErrBadTimestamp, []string{testSecret}},
		{"1", sume.SignatureHeader("1", body, testSecret), sume.ErrStaleTimestamp, scheme.ErrStaleTimestamp, []string{testSecret}},
		{ts, sume.SignatureHeader(ts, body, testSecret), sume.ErrMismatch, scheme.ErrMismatch, []string{otherSecret}},
	} {
		_, err := sumeVerify(tt.ts, tt.sig, body, tt.secrets, 5*time.Minute, sumeNow)
		if !errors.Is(err, tt.sume) || !errors.Is(err, tt.as) || err.Error() != tt.sume.Error() {
			t.Errorf("%v: want %v, also %v, reading as the first", err, tt.sume, tt.as)
		}
		if strings.Contains(err.Error(), hex.EncodeToString(sume.Sign(testSecret, tt.ts, body))) {
			t.Errorf("error %q holds the MAC", err)
		}
	}
}
