package sume

import (
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzParseSignature checks the header parser on any input: it never
// panics, fails only with its two errors, and returns exactly the MACs of
// the well-formed sume-v1 entries.
func FuzzParseSignature(f *testing.F) {
	mac := hex.EncodeToString(Sign(testSecret, "1800000000", []byte(`{}`)))
	for _, s := range []string{
		"", ",", "sume-v1=" + mac, "sume-v1=" + mac + ",sume-v1=" + mac,
		" sume-v1=" + mac + " , v0=abc", "sume-v1=", "sume-v1=" + mac[:63], "sume-v1=" + strings.ToUpper(mac),
		"sume-v1=" + mac + "0", "SUME-V1=" + mac, "sume-v1==" + mac, "sume-v1=\x00" + mac[1:],
		"v1=" + mac, "sume-v1=" + mac + ",sume-v1=zz",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		macs, err := parseSignature(header)
		if err != nil {
			if !errors.Is(err, ErrNoSignature) && !errors.Is(err, ErrMalformedSignature) {
				t.Fatalf("error %v is not one of the parser's", err)
			}
			if macs != nil {
				t.Fatalf("MACs beside an error")
			}
			return
		}
		// The MACs, in order, are the entries that start with sume-v1=.
		var want []string
		for _, e := range strings.Split(header, ",") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(e), "sume-v1="); ok {
				want = append(want, v)
			}
		}
		if len(macs) == 0 || len(macs) != len(want) {
			t.Fatalf("%d MACs from %d sume-v1 entries", len(macs), len(want))
		}
		for i, m := range macs {
			if len(m) != 32 || hex.EncodeToString(m) != want[i] {
				t.Fatalf("MAC %d = %x from entry %q", i, m, want[i])
			}
		}
	})
}

// FuzzVerify checks the verifier on any timestamp, header, body and
// secret: a header the provider would send for the body verifies, the same
// header over other bytes or under another secret does not, no error text
// holds a MAC or the secret, and nothing verifies without a matching entry.
func FuzzVerify(f *testing.F) {
	f.Add("1800000000", "", []byte(`{"event":"job.completed","job_id":"job_1"}`), testSecret, int64(0))
	f.Add("1800000000", "sume-v1=00", []byte(``), testSecret, int64(-300))
	f.Add("01800000000", "v0=1", []byte(`not json`), "s", int64(299))
	f.Add("+1800000000", "sume-v1="+strings.Repeat("a", 64), []byte{0xff, 0}, otherSecret, int64(1<<62))
	f.Fuzz(func(t *testing.T, timestamp, header string, body []byte, secret string, skew int64) {
		const tolerance = 5 * time.Minute
		secrets := []string{secret}

		// Any input: no panic, only the verifier's errors, and a success
		// only when an entry is the MAC of these bytes at this timestamp.
		ts, err := Verify(timestamp, header, body, secrets, tolerance, testNow)
		want := hex.EncodeToString(Sign(secret, timestamp, body))
		switch {
		case err == nil:
			if !strings.Contains(header, "sume-v1="+want) {
				t.Fatalf("verified without an entry that matches")
			}
			if strconv.FormatInt(ts, 10) != timestamp {
				t.Fatalf("timestamp %d from %q", ts, timestamp)
			}
		case !errors.Is(err, ErrNoSignature) && !errors.Is(err, ErrMalformedSignature) &&
			!errors.Is(err, ErrBadTimestamp) && !errors.Is(err, ErrStaleTimestamp) && !errors.Is(err, ErrMismatch):
			t.Fatalf("error %v is not one of the verifier's", err)
		case strings.Contains(err.Error(), want) || (len(secret) >= 8 && strings.Contains(err.Error(), secret)):
			t.Fatalf("error text %q holds the MAC or the secret", err)
		}

		// What the provider sends, at a time within the tolerance, verifies.
		at := testNow.Add(time.Duration(skew%int64(tolerance/time.Second)) * time.Second)
		fresh := strconv.FormatInt(at.Unix(), 10)
		sent := SignatureHeader(fresh, body, secret)
		if _, err := Verify(fresh, sent, body, secrets, tolerance, testNow); err != nil {
			t.Fatalf("the provider's own signature failed: %v", err)
		}
		if _, err := Verify(fresh, header+","+sent, body, append(secrets, "other"), tolerance, testNow); err != nil &&
			!errors.Is(err, ErrMalformedSignature) {
			t.Fatalf("a valid entry after others failed: %v", err)
		}
		// The same header over other bytes, or checked with another secret,
		// does not.
		if _, err := Verify(fresh, sent, append(body, '\n'), secrets, tolerance, testNow); !errors.Is(err, ErrMismatch) {
			t.Fatalf("a changed body: %v, want ErrMismatch", err)
		}
		if _, err := Verify(fresh, sent, body, []string{secret + "x"}, tolerance, testNow); !errors.Is(err, ErrMismatch) {
			t.Fatalf("another secret: %v, want ErrMismatch", err)
		}
	})
}
