package sume

import (
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	testSecret  = "whsec_current_0123456789"
	otherSecret = "whsec_previous_9876543210"
)

var testNow = time.Unix(1_800_000_000, 0)

func TestVerify(t *testing.T) {
	body := []byte(`{"event":"job.completed","job_id":"job_1","status":"COMPLETED"}`)
	ts := strconv.FormatInt(testNow.Unix(), 10)
	good := SignatureHeader(ts, body, testSecret)
	mac := hex.EncodeToString(Sign(testSecret, ts, body))
	at := func(d time.Duration) string { return strconv.FormatInt(testNow.Add(d).Unix(), 10) }

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
		{name: "rotation: valid entry first", ts: ts, sig: good + "," + SignatureHeader(ts, body, "stale"), want: nil},
		{name: "rotation: valid entry last", ts: ts, sig: SignatureHeader(ts, body, "stale") + ", " + good, want: nil},
		{name: "rotation: second configured secret", ts: ts, sig: SignatureHeader(ts, body, otherSecret), secrets: []string{testSecret, otherSecret}},
		{name: "other scheme entries are skipped", ts: ts, sig: "sume-v2=abc," + good},
		{name: "wrong secret", ts: ts, sig: SignatureHeader(ts, body, otherSecret), want: ErrMismatch},
		{name: "tampered body", ts: ts, sig: good, body: append([]byte{' '}, body...), want: ErrMismatch},
		{name: "re-serialized JSON", ts: ts, sig: SignatureHeader(ts, []byte(`{"event": "job.completed", "job_id": "job_1", "status": "COMPLETED"}`), testSecret), want: ErrMismatch},
		{name: "signature for another timestamp", ts: at(time.Second), sig: good, want: ErrMismatch},
		{name: "missing header", ts: ts, sig: "", want: ErrNoSignature},
		{name: "no sume-v1 entry", ts: ts, sig: "v1=" + mac, want: ErrNoSignature},
		{name: "empty sume-v1 entry", ts: ts, sig: "sume-v1=", want: ErrMalformedSignature},
		{name: "63 hex characters", ts: ts, sig: "sume-v1=" + mac[:63], want: ErrMalformedSignature},
		{name: "65 hex characters", ts: ts, sig: "sume-v1=" + mac + "0", want: ErrMalformedSignature},
		{name: "uppercase hex", ts: ts, sig: "sume-v1=" + strings.ToUpper(mac), want: ErrMalformedSignature},
		{name: "not hex", ts: ts, sig: "sume-v1=" + strings.Repeat("g", 64), want: ErrMalformedSignature},
		{name: "malformed entry beside a valid one", ts: ts, sig: good + ",sume-v1=zz", want: ErrMalformedSignature},
		{name: "timestamp missing", ts: "", sig: good, want: ErrBadTimestamp},
		{name: "timestamp with sign", ts: "+" + ts, sig: good, want: ErrBadTimestamp},
		{name: "timestamp with leading zero", ts: "0" + ts, sig: good, want: ErrBadTimestamp},
		{name: "timestamp with space", ts: ts + " ", sig: good, want: ErrBadTimestamp},
		{name: "timestamp in milliseconds is stale", ts: ts + "000", sig: good, want: ErrStaleTimestamp},
		{name: "timestamp decimal", ts: ts + ".0", sig: good, want: ErrBadTimestamp},
		{name: "timestamp overflow", ts: strings.Repeat("9", 30), sig: good, want: ErrBadTimestamp},
		{name: "past, tolerance minus 1s", ts: at(-4*time.Minute - 59*time.Second), sig: SignatureHeader(at(-299*time.Second), body, testSecret), want: nil},
		{name: "past, exactly tolerance", ts: at(-5 * time.Minute), sig: SignatureHeader(at(-5*time.Minute), body, testSecret), want: nil},
		{name: "past, tolerance plus 1s", ts: at(-301 * time.Second), sig: SignatureHeader(at(-301*time.Second), body, testSecret), want: ErrStaleTimestamp},
		{name: "future, tolerance minus 1s", ts: at(299 * time.Second), sig: SignatureHeader(at(299*time.Second), body, testSecret), want: nil},
		{name: "future, tolerance plus 1s", ts: at(301 * time.Second), sig: SignatureHeader(at(301*time.Second), body, testSecret), want: ErrStaleTimestamp},
		{name: "custom tolerance", ts: at(-61 * time.Second), sig: SignatureHeader(at(-61*time.Second), body, testSecret), tolerance: time.Minute, want: ErrStaleTimestamp},
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
			got, err := Verify(tt.ts, tt.sig, b, secrets, tol, testNow)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify() error = %v, want %v", err, tt.want)
			}
			if err == nil && strconv.FormatInt(got, 10) != tt.ts {
				t.Errorf("Verify() timestamp = %d, want %s", got, tt.ts)
			}
			if err != nil {
				for _, secret := range append(secrets, testSecret, otherSecret) {
					want := hex.EncodeToString(Sign(secret, tt.ts, b))
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

// TestVerifyMatchesOpenSSL pins the MAC to an independent computation:
// printf '1800000000.{"job_id":"job_1"}' | openssl dgst -sha256 -hmac secret
func TestVerifyMatchesOpenSSL(t *testing.T) {
	got := hex.EncodeToString(Sign("secret", "1800000000", []byte(`{"job_id":"job_1"}`)))
	want := "9c767ab5f5a579bc95560e6123a5ca2b3a3a9a714b69c5531e41150f635e265c"
	if got != want {
		t.Fatalf("Sign() = %s, want %s", got, want)
	}
}
