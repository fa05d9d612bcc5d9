// Package scheme adapts the providers' webhook signature schemes: Sume's
// (through package sume), Vibe's scheduled jobs, Standard Webhooks,
// Stripe, GitHub and a configurable generic HMAC. Each verifies a delivery
// exactly and strictly, on the raw bytes, and all but Sume's name the
// delivery's idempotency key and event.
package scheme

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"time"

	"inbox/inbox"
	"inbox/sume"
)

// Verification failures. Their texts name the cause for the log; none holds
// a secret, a signature or the body, and none is ever sent to the client.
var (
	ErrNoSignature        = errors.New("signature header missing, empty or repeated")
	ErrMalformedSignature = errors.New("signature header is not in the scheme's exact form")
	ErrBadTimestamp       = errors.New("timestamp is missing, repeated or not a canonical integer")
	ErrStaleTimestamp     = errors.New("timestamp is outside the tolerance")
	ErrMismatch           = errors.New("no signature matches a live configured secret")
	ErrCaller             = errors.New("caller header is missing, repeated or not the expected caller")
	// ErrInvalidPayload is a verified body that the scheme's contract
	// refuses (Vibe: 400).
	ErrInvalidPayload = errors.New("verified payload does not follow the scheme's schema")
)

// Secret is one configured signing key of a source.
type Secret struct {
	// Key is the HMAC key, as the scheme derives it from the configured
	// secret.
	Key []byte
	// Expires is when the secret stops verifying on its own, so a retired
	// secret need not be removed by hand at the right moment; zero: never.
	Expires time.Time
}

// Fingerprint names the secret in output and in the store without
// revealing it: the first 4 bytes of the key's sha256, in hex.
func (s Secret) Fingerprint() string {
	sum := sha256.Sum256(s.Key)
	return hex.EncodeToString(sum[:4])
}

// Live reports whether the secret may verify at now.
func (s Secret) Live(now time.Time) bool {
	return len(s.Key) > 0 && (s.Expires.IsZero() || now.Before(s.Expires))
}

// Verified is what a successful verification established.
type Verified struct {
	// TS is the signed timestamp in Unix seconds; for a scheme that signs
	// none (GitHub), the time of receipt.
	TS int64
	// Signed says TS is a timestamp the sender signed, not the time of
	// receipt: how far it is from the receiver's clock says how far the
	// two clocks (and the delivery's delay) are apart.
	Signed bool
	// Secret is the index of the first secret that matched.
	Secret int
}

// Scheme verifies a delivery's headers and raw body against the source's
// secrets at now. It returns one of the Err* values (possibly wrapped), or
// sume's for the Sume scheme.
type Scheme interface {
	// Name is the scheme's name in configuration and output.
	Name() string
	Verify(h http.Header, body []byte, secrets []Secret, now time.Time) (Verified, error)
}

// Identity is what a delivery names of itself.
type Identity struct {
	Key   string // the idempotency key; "" when the delivery names none
	Event string // the event name; "" when it names none
	// Response is the answer body the source saves with the row and gives
	// again to every repeat; nil for none.
	Response []byte
}

// Identifier is a Scheme that names a verified delivery's key and event
// itself. Sume's scheme is not one: inbox.Classify reads Sume's bodies.
type Identifier interface {
	// Identify fails only with ErrInvalidPayload, for a scheme whose
	// contract answers an invalid payload (Vibe); the others return an empty
	// key instead, and the delivery is parked.
	Identify(h http.Header, body []byte) (Identity, error)
}

// KindOf returns how the deliveries s verifies are keyed: inbox.KindKeyed
// for an Identifier, which names each delivery's key and event, else
// inbox.KindBody (Sume's bodies name their job).
func KindOf(s Scheme) inbox.Kind {
	if _, ok := s.(Identifier); ok {
		return inbox.KindKeyed
	}
	return inbox.KindBody
}

// Rules returns r with what s decides of classification: the Kind, and
// for a scheme that keys every delivery by its body (KeysByBody), ByBody.
func Rules(s Scheme, r inbox.Rules) inbox.Rules {
	r.Kind = KindOf(s)
	if b, ok := s.(interface{ KeysByBody() bool }); ok {
		r.ByBody = b.KeysByBody()
	}
	return r
}

// Named returns what inbox.Classify takes of id.
func (id Identity) Named() inbox.Named {
	return inbox.Named{Key: id.Key, Event: id.Event}
}

// single returns a header's value when it is sent exactly once, and ok
// false when it is absent or repeated: Go keeps each physical header line
// as its own value.
func single(h http.Header, name string) (string, bool) {
	if v := h.Values(name); len(v) == 1 {
		return v[0], true
	}
	return "", false
}

// parseTime accepts only the canonical decimal form (sume's: digits, no
// sign, no leading zero, no spaces, at most 18 digits).
func parseTime(s string) (int64, error) {
	ts, err := sume.ParseTimestamp(s)
	if err != nil {
		return 0, ErrBadTimestamp
	}
	return ts, nil
}

// fresh checks that ts is within tolerance of now, in either direction.
func fresh(ts int64, tolerance time.Duration, now time.Time) error {
	skew := now.Unix() - ts
	limit := int64(tolerance / time.Second)
	if skew > limit || skew < -limit {
		return ErrStaleTimestamp
	}
	return nil
}

// match compares every MAC sent with the one sign computes under each live
// secret, in constant time and with no early exit, so the time taken does
// not depend on which entry or which secret matched. It returns the index
// of the first matching secret, or ErrMismatch.
func match(secrets []Secret, now time.Time, macs [][]byte, sign func(key []byte) []byte) (int, error) {
	found := -1
	for i, s := range secrets {
		if !s.Live(now) {
			continue
		}
		want := sign(s.Key)
		for _, got := range macs {
			if hmac.Equal(got, want) && found < 0 {
				found = i
			}
		}
	}
	if found < 0 {
		return 0, ErrMismatch
	}
	return found, nil
}

// hmacSHA256 returns the HMAC-SHA256 under key of the parts, concatenated.
func hmacSHA256(key []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// lowerHexMAC decodes exactly 64 lowercase hex characters; ok false for
// anything else.
func lowerHexMAC(s string) ([]byte, bool) {
	if len(s) != 2*sha256.Size || !sume.IsLowerHex(s) {
		return nil, false
	}
	mac, err := hex.DecodeString(s)
	return mac, err == nil
}

func hexString(b []byte) string { return hex.EncodeToString(b) }
