// Package sume adapts the Sume provider: the form of its webhook signature
// (verified by scheme.Sume) and its API.
package sume

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// The headers a Sume delivery carries.
const (
	HeaderTimestamp = "X-Sume-Webhook-Timestamp"
	HeaderSignature = "X-Sume-Webhook-Signature"
	signaturePrefix = "sume-v1="
)

// Verification failures. Their texts name the cause for the log; none holds
// a secret, a signature or the body, and none is ever sent to the client.
// scheme.Sume returns them as scheme's errors too (errors.Is holds for
// both), so one function maps them to statuses.
var (
	ErrNoSignature        = errors.New("no sume-v1 signature")
	ErrMalformedSignature = errors.New("sume-v1 signature is not 64 lowercase hex characters")
	ErrBadTimestamp       = errors.New("timestamp is missing or not a canonical integer")
	ErrStaleTimestamp     = errors.New("timestamp is outside the tolerance")
	ErrMismatch           = errors.New("no signature matches a configured secret")
)

// Check does everything verifying a Sume delivery takes but comparing the
// MACs, which scheme.Sume does as every scheme does: it parses the
// signature header's sume-v1 entries (comma-separated; several during a
// secret rotation) and the timestamp, and checks the timestamp's
// freshness against now within tolerance in either direction. It returns
// the timestamp and the MACs sent, or one of the Err* values above (not
// ErrMismatch).
func Check(timestamp, signature string, tolerance time.Duration, now time.Time) (int64, [][]byte, error) {
	macs, err := parseSignature(signature)
	if err != nil {
		return 0, nil, err
	}
	ts, err := ParseTimestamp(timestamp)
	if err != nil {
		return 0, nil, err
	}
	if skew := now.Sub(time.Unix(ts, 0)); skew > tolerance || skew < -tolerance {
		return 0, nil, ErrStaleTimestamp
	}
	return ts, macs, nil
}

// Sign returns the raw HMAC-SHA256 of "<timestamp>.<body>" under secret,
// the MAC a sume-v1 entry carries in hex.
func Sign(secret, timestamp string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// SignatureHeader returns the header value the provider sends for body at
// timestamp, one sume-v1 entry per secret.
func SignatureHeader(timestamp string, body []byte, secrets ...string) string {
	entries := make([]string, len(secrets))
	for i, s := range secrets {
		entries[i] = signaturePrefix + hex.EncodeToString(Sign(s, timestamp, body))
	}
	return strings.Join(entries, ",")
}

// parseSignature returns the decoded MACs of the sume-v1 entries. Entries of
// other schemes are skipped, so a future scheme can be sent alongside; a
// sume-v1 entry that is not exactly 64 lowercase hex characters rejects the
// whole header.
func parseSignature(header string) ([][]byte, error) {
	var macs [][]byte
	for entry := range strings.SplitSeq(header, ",") {
		entry = strings.TrimSpace(entry)
		v, ok := strings.CutPrefix(entry, signaturePrefix)
		if !ok {
			continue
		}
		if len(v) != 2*sha256.Size || !IsLowerHex(v) {
			return nil, ErrMalformedSignature
		}
		mac, _ := hex.DecodeString(v) // cannot fail: checked above
		macs = append(macs, mac)
	}
	if len(macs) == 0 {
		return nil, ErrNoSignature
	}
	return macs, nil
}

// IsLowerHex reports whether s holds only the characters 0-9 and a-f.
func IsLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ParseTimestamp accepts only the canonical decimal form: digits, no sign,
// no leading zero, no spaces, at most 18 digits so it cannot overflow.
func ParseTimestamp(s string) (int64, error) {
	if s == "" || len(s) > 18 || (s[0] == '0' && len(s) > 1) {
		return 0, ErrBadTimestamp
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, ErrBadTimestamp
		}
	}
	ts, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, ErrBadTimestamp
	}
	return ts, nil
}
