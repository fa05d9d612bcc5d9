package scheme

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
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
	// JobIDs, when not empty, are the only jobIds the source expects: a run
	// of any other job is an invalid payload (400), never stored.
	JobIDs []string
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
	return Verified{TS: ts, Signed: true, Secret: i}, nil
}

// SignVibe returns the Vibe-Signature header value for body at ts under
// secret, as Vibe sends it.
func SignVibe(secret string, ts int64, body []byte) string {
	t := strconv.FormatInt(ts, 10)
	return "t=" + t + ",v1=" + hexString(hmacSHA256([]byte(secret), []byte(t), []byte{'.'}, body))
}

// vibeType is the only run type Vibe sends.
const vibeType = "scheduled_job.run"

// vibeTimeLayout is scheduledFor's form: UTC ISO-8601 with milliseconds,
// as JavaScript's toISOString writes it (the Z is checked apart).
const vibeTimeLayout = "2006-01-02T15:04:05.000"

// Identify checks the run's payload against Vibe's schema before anything
// is stored, as the contract asks: a UTF-8 JSON object, each field under
// its exact name and at most once, type "scheduled_job.run", jobId and runId
// non-empty strings (jobId one of JobIDs when the source lists them),
// scheduledFor a UTC time as "2006-01-02T15:04:05.000Z", attempt an integer
// 1 to 4, late a boolean and trigger schedule or manual. The key is runId,
// the event type; the response is Vibe's 202 body. Anything else is
// ErrInvalidPayload.
func (v Vibe) Identify(_ http.Header, body []byte) (Identity, error) {
	doc, ok := jsonObject(body)
	if !ok || !utf8.Valid(body) {
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
	if typ != vibeType || jobID == "" || runID == "" || err != nil || attempt < 1 || attempt > 4 ||
		(late != "true" && late != "false") || (trigger != "schedule" && trigger != "manual") ||
		!vibeTime(scheduledFor) || (len(v.JobIDs) > 0 && !slices.Contains(v.JobIDs, jobID)) {
		return Identity{}, ErrInvalidPayload
	}
	return Identity{Key: runID, Event: typ, Response: []byte(vibeResponse)}, nil
}

// vibeTime reports whether s is a UTC time in exactly the form
// "2006-01-02T15:04:05.000Z", and a real one (no 24:00, no 31 April).
func vibeTime(s string) bool {
	local, ok := strings.CutSuffix(s, "Z")
	if !ok {
		return false
	}
	t, err := time.Parse(vibeTimeLayout, local)
	return err == nil && t.Format(vibeTimeLayout) == local
}

// jsonObject decodes a JSON object's members, each raw, and ok false for
// anything that is not one object: other JSON, trailing data, or a member
// name sent twice (which of the two a reader takes differs between
// parsers).
func jsonObject(body []byte) (map[string]json.RawMessage, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	doc := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		name, isName := tok.(string)
		if err != nil || !isName {
			return nil, false
		}
		var raw json.RawMessage
		if _, dup := doc[name]; dup || dec.Decode(&raw) != nil {
			return nil, false
		}
		doc[name] = raw
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return doc, true
}

// vibeSecretPrefix begins every Vibe signing secret.
const vibeSecretPrefix = "vjs_"

// VibeKey returns the HMAC key of a Vibe signing secret: the UTF-8 bytes of
// the whole string, prefix included, as Vibe signs with it. It fails unless
// the secret has Vibe's form, vjs_ and 43 unpadded base64url characters
// (32 random bytes): anything else is a placeholder, a truncated paste or
// another provider's secret, which would verify nothing. Its errors never
// hold the secret.
func VibeKey(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, vibeSecretPrefix)
	if !ok || len(secret) != 47 {
		return nil, errors.New("not a Vibe secret: want vjs_ and 43 base64url characters (47 in all)")
	}
	if raw, err := base64.RawURLEncoding.Strict().DecodeString(b64); err != nil || len(raw) != 32 {
		return nil, errors.New("not a Vibe secret: the part after vjs_ is not 43 unpadded base64url characters")
	}
	return []byte(secret), nil
}
