package scheme

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// HMAC is a generic HMAC-SHA256 scheme for providers with no scheme of
// their own here. Build it with NewHMAC.
type HMAC struct {
	opts HMACOptions
}

// HMACOptions describe a generic HMAC scheme.
type HMACOptions struct {
	// Header carries the signature, sent exactly once.
	Header string
	// Prefix, when set, must begin the header's value ("sha256=").
	Prefix string
	// Encoding of the MAC: "hex" (64 lowercase characters) or "base64"
	// (standard, padded).
	Encoding string
	// TimestampHeader, when set, carries a canonical Unix-seconds timestamp
	// that must be within Tolerance either way; the MAC is then over
	// "<timestamp>.<body>" rather than the body alone.
	TimestampHeader string
	Tolerance       time.Duration
	// How the key is found, exactly one of: a top-level string field of the
	// JSON body, a header, or "sha256" of the body.
	KeyField, KeyHeader, KeyFrom string
	// How the event is found, at most one of: a top-level string field of
	// the JSON body, or a header.
	EventField, EventHeader string
}

// NewHMAC returns the scheme the options describe; it fails when they are
// incomplete or contradict each other.
func NewHMAC(o HMACOptions) (*HMAC, error) {
	keys := 0
	for _, k := range []string{o.KeyField, o.KeyHeader, o.KeyFrom} {
		if k != "" {
			keys++
		}
	}
	switch {
	case o.Header == "":
		return nil, errors.New("hmac: no signature header")
	case o.Encoding != "hex" && o.Encoding != "base64":
		return nil, fmt.Errorf("hmac: encoding %q: want hex or base64", o.Encoding)
	case keys != 1:
		return nil, errors.New("hmac: name exactly one of key_field, key_header and key_from")
	case o.KeyFrom != "" && o.KeyFrom != "sha256":
		return nil, fmt.Errorf("hmac: key_from %q: only sha256 is supported", o.KeyFrom)
	case o.EventField != "" && o.EventHeader != "":
		return nil, errors.New("hmac: name at most one of event_field and event_header")
	case o.TimestampHeader != "" && o.Tolerance <= 0:
		return nil, errors.New("hmac: a timestamp header needs a positive tolerance")
	}
	return &HMAC{opts: o}, nil
}

// KeysByBody reports whether the scheme keys each delivery by its body's
// sha256 (key_from = "sha256").
func (s *HMAC) KeysByBody() bool { return s.opts.KeyFrom == "sha256" }

// Name returns "hmac".
func (*HMAC) Name() string { return "hmac" }

// Verify checks the signature header's form, the timestamp when one is
// configured, and the MAC.
func (s *HMAC) Verify(h http.Header, body []byte, secrets []Secret, now time.Time) (Verified, error) {
	header, ok := single(h, s.opts.Header)
	if !ok || header == "" {
		return Verified{}, ErrNoSignature
	}
	sig, ok := strings.CutPrefix(header, s.opts.Prefix)
	if !ok {
		return Verified{}, ErrMalformedSignature
	}
	var mac []byte
	if s.opts.Encoding == "hex" {
		mac, ok = lowerHexMAC(sig)
	} else {
		var err error
		mac, err = base64.StdEncoding.Strict().DecodeString(sig)
		ok = err == nil && len(mac) == sha256.Size
	}
	if !ok {
		return Verified{}, ErrMalformedSignature
	}
	ts, parts := now.Unix(), [][]byte{body}
	if s.opts.TimestampHeader != "" {
		t, ok := single(h, s.opts.TimestampHeader)
		if !ok {
			return Verified{}, ErrBadTimestamp
		}
		var err error
		if ts, err = parseTime(t); err != nil {
			return Verified{}, err
		}
		if err := fresh(ts, s.opts.Tolerance, now); err != nil {
			return Verified{}, err
		}
		parts = [][]byte{[]byte(t), {'.'}, body}
	}
	i, err := match(secrets, now, [][]byte{mac}, func(key []byte) []byte { return hmacSHA256(key, parts...) })
	if err != nil {
		return Verified{}, err
	}
	return Verified{TS: ts, Signed: s.opts.TimestampHeader != "", Secret: i}, nil
}

// Sign returns the signature header value for body (at ts, when a
// timestamp header is configured) under secret.
func (s *HMAC) Sign(secret string, ts int64, body []byte) string {
	parts := [][]byte{body}
	if s.opts.TimestampHeader != "" {
		parts = [][]byte{[]byte(formatTime(ts)), {'.'}, body}
	}
	mac := hmacSHA256([]byte(secret), parts...)
	if s.opts.Encoding == "hex" {
		return s.opts.Prefix + hex.EncodeToString(mac)
	}
	return s.opts.Prefix + base64.StdEncoding.EncodeToString(mac)
}

// Identify finds the key and the event as configured.
func (s *HMAC) Identify(h http.Header, body []byte) (Identity, error) {
	var id Identity
	switch {
	case s.opts.KeyField != "":
		id.Key = jsonField(body, s.opts.KeyField)
	case s.opts.KeyHeader != "":
		id.Key, _ = single(h, s.opts.KeyHeader)
	default:
		// key_from = "sha256": the key stays empty, and inbox.Classify
		// keys the row by the body's sum under the rules KeysByBody sets
		// (Rules).
	}
	switch {
	case s.opts.EventField != "":
		id.Event = jsonField(body, s.opts.EventField)
	case s.opts.EventHeader != "":
		id.Event, _ = single(h, s.opts.EventHeader)
	}
	return id, nil
}
