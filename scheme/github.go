package scheme

import (
	"net/http"
	"strings"
	"time"
)

// The headers of a GitHub webhook delivery.
const (
	HeaderGitHubSignature = "X-Hub-Signature-256"
	HeaderGitHubDelivery  = "X-GitHub-Delivery"
	HeaderGitHubEvent     = "X-GitHub-Event"
)

// GitHub is GitHub's scheme: one X-Hub-Signature-256 header of exactly
// "sha256=<64 lowercase hex>", an HMAC-SHA256 of the body. GitHub signs no
// timestamp, so nothing bounds a replay but the key: the delivery id.
type GitHub struct{}

// Name returns "github".
func (GitHub) Name() string { return "github" }

// Verify checks the header's form and the MAC; the delivery's timestamp is
// the time of receipt.
func (GitHub) Verify(h http.Header, body []byte, secrets []Secret, now time.Time) (Verified, error) {
	header, ok := single(h, HeaderGitHubSignature)
	if !ok || header == "" {
		return Verified{}, ErrNoSignature
	}
	sig, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return Verified{}, ErrMalformedSignature
	}
	mac, ok := lowerHexMAC(sig)
	if !ok {
		return Verified{}, ErrMalformedSignature
	}
	i, err := match(secrets, now, [][]byte{mac}, func(key []byte) []byte { return hmacSHA256(key, body) })
	if err != nil {
		return Verified{}, err
	}
	return Verified{TS: now.Unix(), Secret: i}, nil
}

// SignGitHub returns the X-Hub-Signature-256 value for body under secret.
func SignGitHub(secret string, body []byte) string {
	return "sha256=" + hexString(hmacSHA256([]byte(secret), body))
}

// Identify names X-GitHub-Delivery as the key and X-GitHub-Event as the
// event, each only when sent exactly once.
func (GitHub) Identify(h http.Header, _ []byte) (Identity, error) {
	key, _ := single(h, HeaderGitHubDelivery)
	event, _ := single(h, HeaderGitHubEvent)
	return Identity{Key: key, Event: event}, nil
}
