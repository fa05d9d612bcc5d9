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
	"time"

	"github.com/rs/zerolog"

	"inbox/inbox"
	"inbox/sume"
)

// Log field keys.
const (
	keyStatus   = "status"
	keyOutcome  = "outcome"
	keyRow      = "row"
	keyReason   = "reason"
	keyCause    = "cause"
	keySize     = "size"
	keyDuration = "duration"
)

// retryAfter is the Retry-After a 503 carries, in seconds.
const retryAfter = "5"

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
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Handler answers webhook deliveries per the receiver contract.
type Handler struct {
	store Store
	cfg   Config
	log   zerolog.Logger
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
)

// ServeHTTP handles one delivery and logs one line about it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	res, size, err := h.receive(r)
	status := statusFor(err)
	switch status {
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", http.MethodPost)
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", retryAfter)
	case http.StatusRequestEntityTooLarge:
		// The rest of the body is not read; do not reuse the connection.
		w.Header().Set("Connection", "close")
	}
	w.WriteHeader(status)

	ev := h.log.Info()
	if status >= 500 {
		ev = h.log.Error()
	} else if status >= 400 {
		ev = h.log.Warn()
	}
	ev = ev.Int(keyStatus, status).Int64(keySize, size).Dur(keyDuration, time.Since(start))
	if err != nil {
		ev = ev.Str(keyCause, err.Error())
	} else {
		ev = ev.Str(keyOutcome, string(res.Outcome)).Str(keyRow, res.ID)
		if res.Reason != "" {
			ev = ev.Str(keyReason, string(res.Reason))
		}
	}
	ev.Msg("delivery")
}

// receive runs the contract's checks in order and stores what passes them.
func (h *Handler) receive(r *http.Request) (inbox.Result, int64, error) {
	if r.Method != http.MethodPost {
		return inbox.Result{}, 0, errMethod
	}
	body, err := readBody(r.Body, r.ContentLength, h.cfg.HardCap)
	if err != nil {
		return inbox.Result{}, r.ContentLength, err
	}
	size := int64(len(body))
	ts, err := sume.Verify(singleValue(r.Header, sume.HeaderTimestamp), strings.Join(r.Header.Values(sume.HeaderSignature), ","),
		body, h.cfg.Secrets, h.cfg.Tolerance, h.cfg.Now())
	if err != nil {
		return inbox.Result{}, size, fmt.Errorf("%w: %w", errUnverified, err)
	}
	res, err := h.store.Put(r.Context(), inbox.Classify(body, ts, h.cfg.Rules))
	if err != nil {
		return inbox.Result{}, size, fmt.Errorf("%w: %w", errStore, err)
	}
	return res, size, nil
}

// statusFor maps the outcome of receive to the status code.
func statusFor(err error) int {
	switch {
	case err == nil:
		return http.StatusNoContent
	case errors.Is(err, errMethod):
		return http.StatusMethodNotAllowed
	case errors.Is(err, errTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, errRead):
		return http.StatusBadRequest
	case errors.Is(err, errUnverified):
		return http.StatusUnauthorized
	case errors.Is(err, errStore):
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
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
