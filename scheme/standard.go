package scheme

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The Standard Webhooks headers (standardwebhooks.com), and the names
// Svix sends the same headers under: webhook-* is Svix's white-label
// option, and Svix's own verifier takes either set.
const (
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"

	HeaderSvixID        = "svix-id"
	HeaderSvixTimestamp = "svix-timestamp"
	HeaderSvixSignature = "svix-signature"
)

// headerSet names the three headers of one Standard Webhooks delivery.
type headerSet struct{ id, timestamp, signature string }

var (
	webhookHeaders = headerSet{HeaderWebhookID, HeaderWebhookTimestamp, HeaderWebhookSignature}
	svixHeaders    = headerSet{HeaderSvixID, HeaderSvixTimestamp, HeaderSvixSignature}
)

// sentIn reports whether h carries any header of the set.
func (s headerSet) sentIn(h http.Header) bool {
	return len(h.Values(s.id))+len(h.Values(s.timestamp))+len(h.Values(s.signature)) > 0
}

// standardHeaders returns the set of names a delivery uses: svix-* when it
// sends any of those, else webhook-*. A delivery that sends headers of both
// sets is refused: which id and timestamp the MAC covers would depend on
// the verifier's preference, and a relay could add one set beside the
// other.
func standardHeaders(h http.Header) (headerSet, error) {
	svix, webhook := svixHeaders.sentIn(h), webhookHeaders.sentIn(h)
	switch {
	case svix && webhook:
		return headerSet{}, fmt.Errorf("%w: both webhook-* and svix-* headers sent", ErrMalformedSignature)
	case svix:
		return svixHeaders, nil
	}
	return webhookHeaders, nil
}

// standardSecretPrefix marks a Standard Webhooks secret: the rest is the
// key in base64.
const standardSecretPrefix = "whsec_"

// errStandardSecret is the one form a Standard Webhooks secret takes.
var errStandardSecret = errors.New("a standard-webhooks secret must be whsec_ and the base64 of the key")

// StandardKey returns the signing key a secret names: the base64 after
// "whsec_", decoded as the specification's libraries decode it; nil for an
// empty secret. It fails on a secret without the prefix (those libraries
// would base64-decode it too, so taking its bytes as the key would sign
// what they cannot verify) and on a part after whsec_ that is not base64;
// its errors never hold the secret. The dispatcher signs forwarded jobs
// with it.
func StandardKey(secret string) ([]byte, error) {
	if secret == "" {
		return nil, nil
	}
	b64, ok := strings.CutPrefix(secret, standardSecretPrefix)
	if !ok {
		return nil, errStandardSecret
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(key) == 0 {
		return nil, errors.New("secret: the part after whsec_ is not base64")
	}
	return key, nil
}

// StandardVerifyKey returns the key of a secret that verifies incoming
// Standard Webhooks deliveries: StandardKey's, and an empty secret is an
// error too.
func StandardVerifyKey(secret string) ([]byte, error) {
	if secret == "" {
		return nil, errStandardSecret
	}
	return StandardKey(secret)
}

// SignStandard returns the Standard Webhooks signature header value for a
// message: "v1," and the base64 HMAC-SHA256 of "<id>.<timestamp>.<body>".
func SignStandard(key []byte, id string, timestamp int64, body []byte) string {
	mac := hmacSHA256(key, fmt.Appendf(nil, "%s.%d.", id, timestamp), body)
	return "v1," + base64.StdEncoding.EncodeToString(mac)
}

// StandardWebhooks is the Standard Webhooks scheme: webhook-id,
// webhook-timestamp and webhook-signature (or svix-id, svix-timestamp and
// svix-signature, as Svix names them; one set only) each sent exactly once, the
// signature a space-separated list of "<version>,<base64>" entries of
// which the v1 ones are compared (other versions, such as the asymmetric
// v1a, are skipped as the specification says), the timestamp within
// Tolerance either way. Secret keys are StandardVerifyKey's.
type StandardWebhooks struct {
	Tolerance time.Duration
}

// Name returns "standard-webhooks".
func (StandardWebhooks) Name() string { return "standard-webhooks" }

// Verify checks the three headers' exact forms, freshness and the MAC.
func (s StandardWebhooks) Verify(h http.Header, body []byte, secrets []Secret, now time.Time) (Verified, error) {
	names, err := standardHeaders(h)
	if err != nil {
		return Verified{}, err
	}
	id, ok := single(h, names.id)
	if !ok || id == "" {
		return Verified{}, ErrMalformedSignature
	}
	header, ok := single(h, names.signature)
	if !ok || header == "" {
		return Verified{}, ErrNoSignature
	}
	var macs [][]byte
	for entry := range strings.SplitSeq(header, " ") {
		version, b64, ok := strings.Cut(entry, ",")
		if !ok || version == "" || b64 == "" {
			return Verified{}, ErrMalformedSignature
		}
		if version != "v1" {
			continue
		}
		mac, err := base64.StdEncoding.Strict().DecodeString(b64)
		if err != nil || len(mac) != sha256.Size {
			return Verified{}, ErrMalformedSignature
		}
		macs = append(macs, mac)
	}
	if len(macs) == 0 {
		return Verified{}, ErrNoSignature
	}
	t, ok := single(h, names.timestamp)
	if !ok {
		return Verified{}, ErrBadTimestamp
	}
	ts, err := parseTime(t)
	if err != nil {
		return Verified{}, err
	}
	if err := fresh(ts, s.Tolerance, now); err != nil {
		return Verified{}, err
	}
	i, err := match(secrets, now, macs, func(key []byte) []byte {
		return hmacSHA256(key, []byte(id), []byte{'.'}, []byte(t), []byte{'.'}, body)
	})
	if err != nil {
		return Verified{}, err
	}
	return Verified{TS: ts, Signed: true, Secret: i}, nil
}

// Identify names the webhook-id (or svix-id) as the key and the body's
// "type" as the event.
func (StandardWebhooks) Identify(h http.Header, body []byte) (Identity, error) {
	names, err := standardHeaders(h)
	if err != nil {
		return Identity{Event: jsonField(body, "type")}, nil
	}
	id, _ := single(h, names.id)
	return Identity{Key: id, Event: jsonField(body, "type")}, nil
}

// jsonField returns the string field name of a JSON object body, under
// that exact name (decoding into a tagged struct would also take other
// casings); "" when the body is no object or the field no string.
func jsonField(body []byte, name string) string {
	var doc map[string]json.RawMessage
	if json.Unmarshal(body, &doc) != nil {
		return ""
	}
	raw := doc[name]
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// formatTime is a timestamp's canonical decimal form.
func formatTime(ts int64) string { return strconv.FormatInt(ts, 10) }
