// Package receiver is the HTTP edge of the inbox: it bounds the body,
// verifies the provider's signature on the raw bytes, classifies the
// delivery, hands it to the store and chooses the status code.
package receiver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"inbox/inbox"
	"inbox/scheme"
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
	keySource   = "source"
)

// retryAfter is the Retry-After a 503 carries, in seconds.
const retryAfter = "5"

// challenge is the WWW-Authenticate every 401 of the Sume source
// carries (other sources name their scheme). It is the same for every
// cause: the answer must not tell a forger which check failed.
const challenge = `sume-v1 realm="webhooks"`

// Outcomes of requests that stored nothing, beside inbox.Outcome's. Logs and
// metrics use them; a rejected request's reason is its cause.
const (
	OutcomeRejected   = "rejected"    // the request failed a check: nothing stored
	OutcomeStoreError = "store_error" // 503: the store could not commit
	OutcomeOverloaded = "overloaded"  // 503: MaxInFlight requests were already in flight, or the Budget was full
)

// Store is what the receiver needs of the inbox.
type Store interface {
	Put(ctx context.Context, d inbox.Delivery) (inbox.Result, error)
}

// Config configures a Handler for one source.
type Config struct {
	// Source names the source (its rows, its log lines); "" is
	// inbox.DefaultSource.
	Source string
	// Scheme verifies deliveries, under its own tolerance of the signed
	// timestamp. A scheme that is a scheme.Identifier names each
	// delivery's key and event; otherwise inbox.Classify reads the body as
	// Sume's. It sets Rules.Kind and Rules.ByBody (scheme.Rules).
	Scheme scheme.Scheme
	// Keys verify the signature, as the scheme takes them, each with an
	// optional expiry; any one of them may match (rotation).
	Keys []scheme.Secret
	// Accepted is the status of a delivery that was stored or counted;
	// 204 when zero.
	Accepted int
	// Rules classify verified bodies.
	Rules inbox.Rules
	// HardCap is the largest body read at all; above it the answer is 413.
	HardCap int64
	// MaxInFlight bounds the requests verified and stored at once: those
	// whose body has arrived. Beyond it the answer is 503 with Retry-After
	// at once, rather than a pile-up. A request whose body is still arriving
	// holds no place in it (BodyTimeout bounds those), so slow or stalled
	// bodies cannot crowd out deliveries. Zero: no bound.
	MaxInFlight int
	// InFlight, when set, is the count MaxInFlight bounds, shared by every
	// handler given the same one, so that several sources together stay
	// within the bound; nil: the handler counts its own requests.
	InFlight *atomic.Int64
	// Receiving, when set, counts the requests whose body is arriving,
	// shared as InFlight is; nil: the handler counts its own.
	Receiving *atomic.Int64
	// Budget bounds the bytes bodies hold in memory from their first byte
	// until their request is answered, shared by every handler given the
	// same one; nil: one of DefaultBodyMemory for this handler alone. It
	// must hold twice HardCap.
	Budget *Budget
	// BodyTimeout is how long a body may take after the headers, plus a
	// second for every MinBodyRate bytes received, within the server's read
	// timeout; a body that falls behind is answered 408 and nothing of it is
	// stored. Zero: only the server's read timeout bounds it.
	BodyTimeout time.Duration
	// OnSkew, when set, is called for each verified delivery whose scheme
	// signs a timestamp, with how far the time of receipt is past it:
	// the delivery's delay plus how far the sender's clock is behind ours.
	OnSkew func(skew time.Duration)
	// OnAnswer, when set, is called once per request after the answer is
	// written: the outcome (an inbox.Outcome or one of the Outcome constants
	// here), its reason (a parked reason or a rejection's cause, else ""),
	// the status code and how long the request took.
	OnAnswer func(outcome, reason string, status int, took time.Duration)
	// OnRefused, when set, is called with each verified delivery the store
	// could not take (the answer is 503), so its key can be remembered. It
	// must return at once and must not keep d.Body.
	OnRefused func(d inbox.Delivery, err error)
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Handler answers webhook deliveries per the receiver contract.
type Handler struct {
	store     Store
	cfg       Config
	keys      []scheme.Secret
	challenge string
	log       zerolog.Logger
	inFlight  *atomic.Int64
	receiving *atomic.Int64
	budget    *Budget
	// verified holds, per key, when it last verified a delivery (Unix ms).
	verified []atomic.Int64
	// unverified counts the requests that failed verification since
	// Unverified last took them.
	unverified struct {
		sync.Mutex
		run inbox.Unverified
		// any is set while run counts a failure: a verified delivery
		// takes the lock only then.
		any atomic.Bool
	}
}

// NewHandler returns a Handler. It fails when no scheme or no secret is
// configured, a configured secret is empty, or a limit is out of range, so
// the process refuses to start.
func NewHandler(store Store, cfg Config, log zerolog.Logger) (*Handler, error) {
	if cfg.Scheme == nil {
		return nil, errors.New("no scheme configured")
	}
	if len(cfg.Keys) == 0 {
		return nil, errors.New("no signing secret configured")
	}
	keys := make([]scheme.Secret, 0, len(cfg.Keys))
	for _, k := range cfg.Keys {
		if len(k.Key) == 0 {
			return nil, errors.New("a configured signing secret is empty")
		}
		keys = append(keys, k)
	}
	if cfg.Source == "" {
		cfg.Source = inbox.DefaultSource
	}
	// The scheme decides how rows are keyed, as it does for reprocess.
	cfg.Rules = scheme.Rules(cfg.Scheme, cfg.Rules)
	if cfg.Accepted == 0 {
		cfg.Accepted = http.StatusNoContent
	}
	if cfg.Accepted < 200 || cfg.Accepted > 299 {
		return nil, fmt.Errorf("accepted status must be 2xx, got %d", cfg.Accepted)
	}
	if cfg.HardCap <= 0 || (cfg.Rules.MaxBody > 0 && cfg.HardCap < cfg.Rules.MaxBody) {
		return nil, fmt.Errorf("hard cap %d must be positive and at least the body limit %d", cfg.HardCap, cfg.Rules.MaxBody)
	}
	if cfg.MaxInFlight < 0 {
		return nil, fmt.Errorf("requests in flight must not be negative, got %d", cfg.MaxInFlight)
	}
	if cfg.BodyTimeout < 0 {
		return nil, fmt.Errorf("body timeout must not be negative, got %s", cfg.BodyTimeout)
	}
	if cfg.Budget == nil {
		cfg.Budget = NewBudget(DefaultBodyMemory)
	}
	if !cfg.Budget.Holds(cfg.HardCap) {
		return nil, fmt.Errorf("body memory %d must be at least twice the hard cap %d", cfg.Budget.Size(), cfg.HardCap)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.InFlight == nil {
		cfg.InFlight = new(atomic.Int64)
	}
	if cfg.Receiving == nil {
		cfg.Receiving = new(atomic.Int64)
	}
	ch := cfg.Scheme.Name() + ` realm="webhooks"`
	if _, ok := cfg.Scheme.(scheme.Sume); ok {
		ch = challenge
	}
	return &Handler{store: store, cfg: cfg, keys: keys, challenge: ch, inFlight: cfg.InFlight, receiving: cfg.Receiving, budget: cfg.Budget,
		log: log.With().Str(keySource, cfg.Source).Logger(), verified: make([]atomic.Int64, len(keys))}, nil
}

// SecretUses returns, for each secret that verified a delivery since the
// handler was made, when it last did. serve saves them in the store.
func (h *Handler) SecretUses() []inbox.SecretUse {
	var out []inbox.SecretUse
	for i := range h.verified {
		if ms := h.verified[i].Load(); ms != 0 {
			out = append(out, inbox.SecretUse{Source: h.cfg.Source, Fingerprint: h.keys[i].Fingerprint(), LastVerified: time.UnixMilli(ms).UTC()})
		}
	}
	return out
}

// Unverified returns the requests that failed verification (answered
// 401) since it was last called, and forgets them: serve adds them to the
// store's count. Count is 0 when there were none.
func (h *Handler) Unverified() inbox.Unverified {
	h.unverified.Lock()
	defer h.unverified.Unlock()
	run := h.unverified.run
	h.unverified.run = inbox.Unverified{}
	h.unverified.any.Store(false)
	return run
}

// failed counts a request that failed verification at now. It takes a
// lock only for an addition: the answer never waits for a write.
func (h *Handler) failed(now time.Time) {
	h.unverified.Lock()
	defer h.unverified.Unlock()
	h.unverified.run = h.unverified.run.Add(inbox.Unverified{Source: h.cfg.Source, Count: 1, First: now.UTC(), Last: now.UTC()})
	h.unverified.any.Store(true)
}

// verifiedAt ends the run of failures that came before a delivery that
// verified at now: the store ends a saved run so too, and a run that
// began before the delivery would otherwise take the failures after it
// down with it. Failures counted after now (a request racing this one)
// keep the run.
func (h *Handler) verifiedAt(now time.Time) {
	if !h.unverified.any.Load() {
		return
	}
	h.unverified.Lock()
	defer h.unverified.Unlock()
	if !h.unverified.run.Last.After(now.UTC()) {
		h.unverified.run = inbox.Unverified{}
		h.unverified.any.Store(false)
	}
}

// Request failures that are not the signature's.
var (
	errMethod     = errors.New("method not allowed")
	errTooLarge   = errors.New("body above the hard cap")
	errRead       = errors.New("read body")
	errSlowBody   = errors.New("body arrived too slowly")
	errUnverified = errors.New("unverified")
	errInvalid    = errors.New("invalid payload")
	errStore      = errors.New("store")
	errOverloaded = errors.New("too many requests in flight")
)

// InFlight returns how many requests whose body has arrived are being
// handled now, by every handler sharing its count: what MaxInFlight bounds.
func (h *Handler) InFlight() int { return int(h.inFlight.Load()) }

// Receiving returns how many requests are receiving their body now, by
// every handler sharing the count.
func (h *Handler) Receiving() int { return int(h.receiving.Load()) }

// ServeHTTP handles one delivery and logs one line about it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var d inbox.Delivery
	var res inbox.Result
	var size int64
	var err error
	switch {
	case r.Method != http.MethodPost:
		// Contract row 1 holds under overload too.
		err = errMethod
	case h.full():
		// The bound is taken already: answer at once, body unread.
		err = errOverloaded
	default:
		var body []byte
		held := reservation{budget: h.budget}
		defer held.release() // once answered: the body is held until then
		h.receiving.Add(1)
		body, err = readBody(w, r, h.cfg.HardCap, h.cfg.BodyTimeout, &held)
		h.receiving.Add(-1)
		size = int64(len(body))
		if err != nil {
			size = r.ContentLength
			break
		}
		n := h.inFlight.Add(1)
		defer h.inFlight.Add(-1)
		if h.cfg.MaxInFlight > 0 && n > int64(h.cfg.MaxInFlight) {
			err = errOverloaded
			break
		}
		d, res, err = h.receive(r, body)
	}
	a := answer(res, err, h.cfg.Accepted)
	switch a.status {
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", http.MethodPost)
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", h.challenge)
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", retryAfter)
		if errors.Is(err, errBodyMemory) {
			// The body is not read (or not whole): shed the connection too.
			w.Header().Set("Connection", "close")
		}
	case http.StatusRequestEntityTooLarge, http.StatusRequestTimeout:
		// The rest of the body is not read; do not reuse the connection.
		w.Header().Set("Connection", "close")
	}
	if err == nil && res.Response != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		w.Write(res.Response)
	} else {
		w.WriteHeader(a.status)
	}
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

// full reports whether MaxInFlight requests are already being verified
// and stored.
func (h *Handler) full() bool {
	return h.cfg.MaxInFlight > 0 && h.inFlight.Load() >= int64(h.cfg.MaxInFlight)
}

// receive runs the contract's checks past the body's, in order, and stores
// what passes them. It returns the delivery as classified, once it is
// verified.
func (h *Handler) receive(r *http.Request, body []byte) (inbox.Delivery, inbox.Result, error) {
	now := h.cfg.Now()
	v, err := h.cfg.Scheme.Verify(r.Header, body, h.keys, now)
	if err != nil {
		h.failed(now)
		return inbox.Delivery{}, inbox.Result{}, fmt.Errorf("%w: %w", errUnverified, err)
	}
	h.verified[v.Secret].Store(now.UnixMilli())
	h.verifiedAt(now)
	if v.Signed && h.cfg.OnSkew != nil {
		h.cfg.OnSkew(now.Sub(time.Unix(v.TS, 0)))
	}
	var named inbox.Named
	var response []byte
	if idf, ok := h.cfg.Scheme.(scheme.Identifier); ok {
		id, err := idf.Identify(r.Header, body)
		if err != nil {
			return inbox.Delivery{}, inbox.Result{}, fmt.Errorf("%w: %w", errInvalid, err)
		}
		named, response = id.Named(), id.Response
	}
	d := inbox.Classify(h.cfg.Source, named, body, v.TS, h.cfg.Rules)
	d.Response = response
	res, err := h.store.Put(r.Context(), d)
	if err != nil {
		if h.cfg.OnRefused != nil {
			h.cfg.OnRefused(d, err)
		}
		return d, inbox.Result{}, fmt.Errorf("%w: %w", errStore, err)
	}
	return d, res, nil
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
func answer(res inbox.Result, err error, accepted int) verdict {
	rejected := func(status int, cause string) verdict {
		return verdict{status: status, outcome: OutcomeRejected, reason: cause}
	}
	switch {
	case err == nil:
		return verdict{status: accepted, outcome: string(res.Outcome), reason: string(res.Reason)}
	case errors.Is(err, errMethod):
		return rejected(http.StatusMethodNotAllowed, "method")
	case errors.Is(err, errTooLarge):
		return rejected(http.StatusRequestEntityTooLarge, "request_too_large")
	case errors.Is(err, errRead):
		return rejected(http.StatusBadRequest, "unreadable_body")
	case errors.Is(err, errSlowBody):
		return rejected(http.StatusRequestTimeout, "slow_body")
	case errors.Is(err, errInvalid):
		return rejected(http.StatusBadRequest, "invalid_payload")
	case errors.Is(err, scheme.ErrNoSignature):
		return rejected(http.StatusUnauthorized, "no_signature")
	case errors.Is(err, scheme.ErrMalformedSignature):
		return rejected(http.StatusUnauthorized, "malformed_signature")
	case errors.Is(err, scheme.ErrBadTimestamp):
		return rejected(http.StatusUnauthorized, "bad_timestamp")
	case errors.Is(err, scheme.ErrStaleTimestamp):
		return rejected(http.StatusUnauthorized, "stale_timestamp")
	case errors.Is(err, scheme.ErrMismatch):
		return rejected(http.StatusUnauthorized, "mismatch")
	case errors.Is(err, scheme.ErrCaller):
		return rejected(http.StatusUnauthorized, "caller")
	case errors.Is(err, errUnverified):
		return rejected(http.StatusUnauthorized, "unverified")
	case errors.Is(err, errOverloaded), errors.Is(err, errBodyMemory):
		return verdict{status: http.StatusServiceUnavailable, outcome: OutcomeOverloaded}
	case errors.Is(err, errStore):
		return verdict{status: http.StatusServiceUnavailable, outcome: OutcomeStoreError}
	default:
		return verdict{status: http.StatusInternalServerError, outcome: "error"}
	}
}
