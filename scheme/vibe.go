package scheme

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The headers a Vibe scheduled-job run carries, and its limits.
const (
	HeaderVibeSignature = "Vibe-Signature"
	HeaderVibeCaller    = "X-Vibe-Caller-Kind"
	vibeCaller          = "schedule"
	// VibeMaxBody is the largest body Vibe's contract accepts; above it the
	// answer is 413.
	VibeMaxBody = 64 << 10
	// VibeTolerance is the freshness the contract asks for.
	VibeTolerance = 300 * time.Second
	// maxSafeInteger is JavaScript's Number.MAX_SAFE_INTEGER: Vibe rejects
	// timestamps above it.
	maxSafeInteger = 1<<53 - 1
)

// vibeResponse is the answer body saved with an accepted run and given
// again to every repeat of its runId.
const vibeResponse = `{"accepted":true}`

// Vibe is the scheme of Vibe's scheduled jobs: one physical Vibe-Signature
// header of exactly "t=<canonical integer>,v1=<64 lowercase hex>", the
// caller header "schedule", and an HMAC-SHA256 of "<t>.<rawBody>" keyed by
// the UTF-8 bytes of the whole vjs_ secret.
type Vibe struct {
	Tolerance time.Duration // VibeTolerance when zero
}

// Name returns "vibe".
func (Vibe) Name() string { return "vibe" }

// Verify checks the caller, the header's exact form, freshness and the MAC.
func (v Vibe) Verify(h http.Header, body []byte, secrets []Secret, now time.Time) (Verified, error) {
	if c, ok := single(h, HeaderVibeCaller); !ok || c != vibeCaller {
		return Verified{}, ErrCaller
	}
	header, ok := single(h, HeaderVibeSignature)
	if !ok || header == "" {
		return Verified{}, ErrNoSignature
	}
	rest, ok := strings.CutPrefix(header, "t=")
	if !ok {
		return Verified{}, ErrMalformedSignature
	}
	t, sig, ok := strings.Cut(rest, ",v1=")
	if !ok {
		return Verified{}, ErrMalformedSignature
	}
	mac, ok := lowerHexMAC(sig)
	if !ok {
		return Verified{}, ErrMalformedSignature
	}
	ts, err := parseTime(t)
	if err != nil || ts > maxSafeInteger {
		return Verified{}, ErrBadTimestamp
	}
	tol := v.Tolerance
	if tol == 0 {
		tol = VibeTolerance
	}
	if err := fresh(ts, tol, now); err != nil {
		return Verified{}, err
	}
	i, err := match(secrets, now, [][]byte{mac}, func(key []byte) []byte {
		return hmacSHA256(key, []byte(t), []byte{'.'}, body)
	})
	if err != nil {
		return Verified{}, err
	}
	return Verified{TS: ts, Secret: i}, nil
}

// SignVibe returns the Vibe-Signature header value for body at ts under
// secret, as Vibe sends it.
func SignVibe(secret string, ts int64, body []byte) string {
	t := strconv.FormatInt(ts, 10)
	return "t=" + t + ",v1=" + hexString(hmacSHA256([]byte(secret), []byte(t), []byte{'.'}, body))
}

// Identify checks the run's payload against Vibe's schema: a UTF-8 JSON
// object with type, jobId, runId and scheduledFor strings (jobId and runId
// not empty), attempt an integer 1 to 4, late a boolean and trigger
// schedule or manual, each under its exact name. The key is runId, the
// event type; the response is Vibe's 202 body. Anything else is
// ErrInvalidPayload.
func (Vibe) Identify(_ http.Header, body []byte) (Identity, error) {
	var doc map[string]json.RawMessage
	if !utf8.Valid(body) || json.Unmarshal(body, &doc) != nil || doc == nil {
		return Identity{}, ErrInvalidPayload
	}
	var typ, jobID, runID, scheduledFor, trigger string
	for name, dst := range map[string]*string{"type": &typ, "jobId": &jobID, "runId": &runID,
		"scheduledFor": &scheduledFor, "trigger": &trigger} {
		raw := doc[name]
		if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, dst) != nil {
			return Identity{}, ErrInvalidPayload
		}
	}
	attempt, err := strconv.Atoi(string(doc["attempt"]))
	late := string(doc["late"])
	if jobID == "" || runID == "" || err != nil || attempt < 1 || attempt > 4 ||
		(late != "true" && late != "false") || (trigger != "schedule" && trigger != "manual") {
		return Identity{}, ErrInvalidPayload
	}
	return Identity{Key: runID, Event: typ, Response: []byte(vibeResponse)}, nil
}
