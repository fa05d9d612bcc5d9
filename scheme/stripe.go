package scheme

import (
	"net/http"
	"strings"
	"time"
)

// HeaderStripeSignature is the header Stripe signs its events in.
const HeaderStripeSignature = "Stripe-Signature"

// Stripe is Stripe's scheme: one Stripe-Signature header of comma-separated
// <scheme>=<value> entries, read as Stripe's own libraries (stripe-node,
// stripe-go) read it: exactly one t=<canonical integer> and at least one
// v1=<64 lowercase hex> (several during a secret roll), every one of them
// compared. Every other entry is skipped: another scheme (v0, test mode's,
// or a v2 yet to come), a name in another case (V1), an entry without "=",
// an empty one; and so is a v1 that is not 64 lowercase hex, which could
// match no MAC, so a malformed v1 beside a good one does not refuse the
// good one. The MAC is an HMAC-SHA256 of "<t>.<body>" keyed by the whole
// whsec_ secret, and t must be within Tolerance either way.
type Stripe struct {
	Tolerance time.Duration
}

// Name returns "stripe".
func (Stripe) Name() string { return "stripe" }

// Verify checks the header's form, freshness and the MAC. Two t entries
// are refused (which one was signed?), where Stripe's libraries would take
// the last.
func (s Stripe) Verify(h http.Header, body []byte, secrets []Secret, now time.Time) (Verified, error) {
	header, ok := single(h, HeaderStripeSignature)
	if !ok || header == "" {
		return Verified{}, ErrNoSignature
	}
	var t string
	var ts int64
	var macs [][]byte
	malformed := false
	for entry := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(entry, "=")
		switch k {
		case "t":
			var err error
			if t != "" {
				return Verified{}, ErrBadTimestamp
			}
			if ts, err = parseTime(v); err != nil {
				return Verified{}, err
			}
			t = v
		case "v1":
			if mac, ok := lowerHexMAC(v); ok {
				macs = append(macs, mac)
			} else {
				malformed = true
			}
		default:
			// Not ours to check, and no reason to refuse.
		}
	}
	if len(macs) == 0 {
		if malformed {
			return Verified{}, ErrMalformedSignature
		}
		return Verified{}, ErrNoSignature
	}
	if t == "" {
		return Verified{}, ErrBadTimestamp
	}
	if err := fresh(ts, s.Tolerance, now); err != nil {
		return Verified{}, err
	}
	i, err := match(secrets, now, macs, func(key []byte) []byte {
		return hmacSHA256(key, []byte(t), []byte{'.'}, body)
	})
	if err != nil {
		return Verified{}, err
	}
	return Verified{TS: ts, Signed: true, Secret: i}, nil
}

// SignStripe returns a Stripe-Signature header value for body at ts, one v1
// entry per secret.
func SignStripe(ts int64, body []byte, secrets ...string) string {
	t := formatTime(ts)
	entries := []string{"t=" + t}
	for _, s := range secrets {
		entries = append(entries, "v1="+hexString(hmacSHA256([]byte(s), []byte(t), []byte{'.'}, body)))
	}
	return strings.Join(entries, ",")
}

// Identify names the event's "id" as the key and its "type" as the event.
func (Stripe) Identify(_ http.Header, body []byte) (Identity, error) {
	return Identity{Key: jsonField(body, "id"), Event: jsonField(body, "type")}, nil
}
