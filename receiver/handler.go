// Package receiver is the HTTP edge of the inbox: it bounds the body,
// verifies the provider's signature on the raw bytes, classifies the
// delivery, hands it to the store and chooses the status code.
package receiver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"inbox/inbox"
	"inbox/sume"
)

// Log field keys.
const (
	keyStatus   = "status"
	keyOutcome  = "outcome"
	keyJob      = "job"
	keyRow      = "row"
	keyReason   = "reason"
	keyCause    = "cause"
	keySize     = "size"
	keyDuration = "duration"
	keyAddr     = "addr"
	keyServes   = "serves"
)

// retryAfter is the Retry-After a 503 carries, in seconds.
const retryAfter = "5"

// challenge is the WWW-Authenticate every 401 carries. It is the same for
// every cause: the answer must not tell a forger which check failed.
const challenge = `sume-v1 realm="webhooks"`

// Outcomes of requests that stored nothing, beside inbox.Outcome's. Logs and
// metrics use them; a rejected request's reason is its cause.
const (
	OutcomeRejected   = "rejected"    // the request failed a check: nothing stored
	OutcomeStoreError = "store_error" // 503: the store could not commit
	OutcomeOverloaded = "overloaded"  // 503: MaxInFlight requests were already in flight
)

// Store is what the receiver needs of the inbox.
type Store interface {
	Put(ctx context.Context, d inbox.Delivery) (inbox.Result, error)
}

// Config configures a Handler.
type Config struct {
	// Secrets verify the signature; any one of them may match (rotation).
	Secrets []string
	// Tolerance bounds the timestamp's distance from now, both directions.
	Tolerance time.Duration
	// Rules classify verified bodies.
	Rules inbox.Rules
	// HardCap is the largest body read at all; above it the answer is 413.
	HardCap int64
	// MaxInFlight bounds the requests handled at once; beyond it the answer
	// is 503 with Retry-After at once, rather than a pile-up. Zero: no bound.
	MaxInFlight int
	// OnAnswer, when set, is called once per request after the answer is
	// written: the outcome (an inbox.Outcome or one of the Outcome constants
	// here), its reason (a parked reason or a rejection's cause, else ""),
	// the status code and how long the request took.
	OnAnswer func(outcome, reason string, status int, took time.Duration)
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Handler answers webhook deliveries per the receiver contract.
type Handler struct {
	store    Store
	cfg      Config
	log      zerolog.Logger
	inFlight atomic.Int64
}

// NewHandler returns a Handler. It fails when no secret is configured or a
// configured secret is empty, so the process refuses to start.
func NewHandler(store Store, cfg Config, log zerolog.Logger) (*Handler, error) {
	if len(cfg.Secrets) == 0 {
		return nil, errors.New("no signing secret configured")
	}
	for _, s := range cfg.Secrets {
		if strings.TrimSpace(s) == "" {
			return nil, errors.New("a configured signing secret is empty")
		}
	}
	if cfg.Tolerance <= 0 {
		return nil, fmt.Errorf("tolerance must be positive, got %s", cfg.Tolerance)
	}
	if cfg.HardCap <= 0 || (cfg.Rules.MaxBody > 0 && cfg.HardCap < cfg.Rules.MaxBody) {
		return nil, fmt.Errorf("hard cap %d must be positive and at least the body limit %d", cfg.HardCap, cfg.Rules.MaxBody)
	}
	if cfg.MaxInFlight < 0 {
		return nil, fmt.Errorf("requests in flight must not be negative, got %d", cfg.MaxInFlight)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Handler{store: store, cfg: cfg, log: log}, nil
}

// Request failures that are not the signature's.
var (
	errMethod     = errors.New("method not allowed")
	errTooLarge   = errors.New("body above the hard cap")
	errRead       = errors.New("read body")
	errUnverified = errors.New("unverified")
	errStore      = errors.New("store")
	errOverloaded = errors.New("too many requests in flight")
)

// InFlight returns how many requests are being handled now.
func (h *Handler) InFlight() int { return int(h.inFlight.Load()) }

// ServeHTTP handles one delivery and logs one line about it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var d inbox.Delivery
	var res inbox.Result
	var size int64
	err := errOverloaded
	n := h.inFlight.Add(1)
	defer h.inFlight.Add(-1)
	if h.cfg.MaxInFlight == 0 || n <= int64(h.cfg.MaxInFlight) {
		d, res, size, err = h.receive(r)
	}
	a := answer(res, err)
	switch a.status {
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", http.MethodPost)
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", challenge)
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", retryAfter)
	case http.StatusRequestEntityTooLarge:
		// The rest of the body is not read; do not reuse the connection.
		w.Header().Set("Connection", "close")
	}
	w.WriteHeader(a.status)
	took := time.Since(start)
	if h.cfg.OnAnswer != nil {
		h.cfg.OnAnswer(a.outcome, a.reason, a.status, took)
	}

	ev := h.log.Info()
	if a.status >= 500 {
		ev = h.log.Error()
	} else if a.status >= 400 {
		ev = h.log.Warn()
	}
	ev = ev.Int(keyStatus, a.status).Str(keyOutcome, a.outcome).Int64(keySize, size).Dur(keyDuration, took)
	if a.reason != "" {
		ev = ev.Str(keyReason, a.reason)
	}
	if d.JobID != "" {
		ev = ev.Str(keyJob, d.JobID)
	}
	if res.ID != "" {
		ev = ev.Str(keyRow, res.ID)
	}
	if err != nil {
		ev = ev.Str(keyCause, err.Error())
	}
	ev.Msg("delivery")
}

// receive runs the contract's checks in order and stores what passes them.
// It returns the delivery as classified, once it is verified.
func (h *Handler) receive(r *http.Request) (inbox.Delivery, inbox.Result, int64, error) {
	if r.Method != http.MethodPost {
		return inbox.Delivery{}, inbox.Result{}, 0, errMethod
	}
	body, err := readBody(r.Body, r.ContentLength, h.cfg.HardCap)
	if err != nil {
		return inbox.Delivery{}, inbox.Result{}, r.ContentLength, err
	}
	size := int64(len(body))
	ts, err := sume.Verify(singleValue(r.Header, sume.HeaderTimestamp), strings.Join(r.Header.Values(sume.HeaderSignature), ","),
		body, h.cfg.Secrets, h.cfg.Tolerance, h.cfg.Now())
	if err != nil {
		return inbox.Delivery{}, inbox.Result{}, size, fmt.Errorf("%w: %w", errUnverified, err)
	}
	d := inbox.Classify(body, ts, h.cfg.Rules)
	res, err := h.store.Put(r.Context(), d)
	if err != nil {
		return d, inbox.Result{}, size, fmt.Errorf("%w: %w", errStore, err)
	}
	return d, res, size, nil
}

// verdict is how a request is answered: the status code, and for logs and
// metrics the outcome with its reason.
type verdict struct {
	status  int
	outcome string
	reason  string
}

// answer maps what receive returned to the answer. It is the one place
// that chooses status codes.
func answer(res inbox.Result, err error) verdict {
	rejected := func(status int, cause string) verdict {
		return verdict{status: status, outcome: OutcomeRejected, reason: cause}
	}
	switch {
	case err == nil:
		return verdict{status: http.StatusNoContent, outcome: string(res.Outcome), reason: string(res.Reason)}
	case errors.Is(err, errMethod):
		return rejected(http.StatusMethodNotAllowed, "method")
	case errors.Is(err, errTooLarge):
		return rejected(http.StatusRequestEntityTooLarge, "request_too_large")
	case errors.Is(err, errRead):
		return rejected(http.StatusBadRequest, "unreadable_body")
	case errors.Is(err, sume.ErrNoSignature):
		return rejected(http.StatusUnauthorized, "no_signature")
	case errors.Is(err, sume.ErrMalformedSignature):
		return rejected(http.StatusUnauthorized, "malformed_signature")
	case errors.Is(err, sume.ErrBadTimestamp):
		return rejected(http.StatusUnauthorized, "bad_timestamp")
	case errors.Is(err, sume.ErrStaleTimestamp):
		return rejected(http.StatusUnauthorized, "stale_timestamp")
	case errors.Is(err, sume.ErrMismatch):
		return rejected(http.StatusUnauthorized, "mismatch")
	case errors.Is(err, errUnverified):
		return rejected(http.StatusUnauthorized, "unverified")
	case errors.Is(err, errOverloaded):
		return verdict{status: http.StatusServiceUnavailable, outcome: OutcomeOverloaded}
	case errors.Is(err, errStore):
		return verdict{status: http.StatusServiceUnavailable, outcome: OutcomeStoreError}
	default:
		return verdict{status: http.StatusInternalServerError, outcome: "error"}
	}
}

// singleValue returns a header's value when it is sent exactly once, and ""
// (which fails verification) when it is absent or repeated.
func singleValue(h http.Header, name string) string {
	if v := h.Values(name); len(v) == 1 {
		return v[0]
	}
	return ""
}

// readBody reads at most limit bytes. A declared length above the limit is
// refused before anything is read.
func readBody(r io.Reader, declared, limit int64) ([]byte, error) {
	if declared > limit {
		return nil, errTooLarge
	}
	var buf bytes.Buffer
	if declared > 0 {
		buf.Grow(int(declared) + 1) // +1: room to see EOF without growing
	}
	n, err := buf.ReadFrom(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errRead, err)
	}
	if n > limit {
		return nil, errTooLarge
	}
	return buf.Bytes(), nil
}
