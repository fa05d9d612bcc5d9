package dispatch

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"inbox/inbox"
	"inbox/scheme"
)

// Headers of a forwarded job, besides the Standard Webhooks ones.
const (
	// HeaderIdempotencyKey is the provider's own key of the row (Sume's
	// job_id, Vibe's runId, ...), the same as HeaderKey: the key for the
	// application's external effects, with HeaderSource beside it.
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderSource         = "Inbox-Source"  // the configured source the row came through
	HeaderKey            = "Inbox-Key"     // the provider's own key of the row
	HeaderRowID          = "Inbox-Row-Id"  // the row's id, unique across sources: inbox show takes it
	HeaderEvent          = "Inbox-Event"   // the event name
	HeaderAttempt        = "Inbox-Attempt" // the attempt number, from 1
)

// Bounds on what is read of a response.
const (
	maxSnippet = 512      // kept in the error
	maxDrain   = 64 << 10 // read and dropped so the connection is reused
)

// Forward POSTs each job's stored body to the application. A 2xx answer is
// success; no answer (a transport failure), 429, 502, 503 and 504 are the
// destination's outage (Down, with the Retry-After of a 429 or 503); 408
// and any other status are retried; any other 4xx is the application's
// "never retry".
type Forward struct {
	url    string
	origin string // scheme and host of url: what an error may name
	key    []byte // nil: unsigned
	// user, when the URL has one, goes as Basic authentication, as an
	// http.Client sends it.
	user *url.Userinfo
	// transport sends each request as it is: no redirect is followed (one
	// would turn the POST into a GET; its answer is a failure), and no
	// client copies the headers for one.
	transport http.RoundTripper
	now       func() time.Time
}

// NewForward returns a Forward to rawURL, signing with secret when it is
// not empty. The secret takes the one form Standard Webhooks libraries
// verify with their defaults, "whsec_" and the base64 of the key. It fails
// when the URL is not absolute http(s), or the secret has another form
// (a raw key would sign what those libraries, which base64-decode every
// secret, cannot verify) or its base64 does not decode.
func NewForward(rawURL, secret string, now func() time.Time) (*Forward, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("forward URL %q: want an absolute URL starting with http:// or https://", redact(rawURL))
	}
	key, err := scheme.StandardKey(secret)
	if err != nil {
		return nil, fmt.Errorf("forward secret: %w: make one with inbox secret (a raw key K signs as whsec_ and the base64 of K)", err)
	}
	if now == nil {
		now = time.Now
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// Keep a connection per worker alive (the default keeps 2).
	tr.MaxIdleConnsPerHost = 1024
	return &Forward{
		url:       u.String(),
		origin:    u.Scheme + "://" + u.Host,
		key:       key,
		user:      u.User,
		transport: tr,
		now:       now,
	}, nil
}

// Deliver POSTs j. The webhook-id is the provider's key, as
// Idempotency-Key: the same on every attempt, as Standard Webhooks asks of
// retries of one message.
func (f *Forward) Deliver(ctx context.Context, j inbox.Job) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url, bytes.NewReader(j.Body))
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	source, key := j.Origin()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "inbox-dispatch")
	req.Header.Set(HeaderIdempotencyKey, key)
	req.Header.Set(HeaderSource, source)
	req.Header.Set(HeaderKey, key)
	req.Header.Set(HeaderRowID, j.ID)
	req.Header.Set(HeaderEvent, j.Event)
	req.Header.Set(HeaderAttempt, strconv.Itoa(j.Attempt))
	if f.user != nil {
		pass, _ := f.user.Password()
		req.SetBasicAuth(f.user.Username(), pass)
	}
	if f.key != nil {
		ts := f.now().Unix()
		req.Header.Set(scheme.HeaderWebhookID, key)
		req.Header.Set(scheme.HeaderWebhookTimestamp, strconv.FormatInt(ts, 10))
		req.Header.Set(scheme.HeaderWebhookSignature, scheme.SignStandard(f.key, key, ts, j.Body))
	}
	resp, err := f.transport.RoundTrip(req)
	if err != nil {
		// Worded as http.Client words it, but naming only the URL's
		// origin: a hook URL's path or query is often its credential
		// (Slack's, Discord's), in the logs and last_error alike. No
		// answer at all is the destination's outage, not the row's.
		return Down(&url.Error{Op: "Post", URL: f.origin, Err: err}, 0)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, maxSnippet))
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	err = fmt.Errorf("HTTP %s%s", resp.Status, quote(snippet))
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return Down(err, ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()))
	case http.StatusBadGateway, http.StatusGatewayTimeout:
		return Down(err, 0)
	}
	switch {
	case resp.StatusCode == http.StatusRequestTimeout:
		return err
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return Reject(err)
	}
	return err
}

// quote renders the start of the application's answer for the error, on
// one line.
func quote(b []byte) string {
	s := strings.TrimSpace(strings.ToValidUTF8(string(b), "?"))
	if s == "" {
		return ""
	}
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	return ": " + s
}

// redact masks a password in a URL for an error message, also in one
// url.Parse refuses or misreads, so the message shows what was typed.
func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		return u.Redacted()
	}
	// Unparseable, or "user:pw@host" taken for scheme "user": mask by hand.
	prefix, rest := "", raw
	if i := strings.Index(rest, "://"); i >= 0 {
		prefix, rest = rest[:i+3], rest[i+3:]
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		if user, _, ok := strings.Cut(rest[:at], ":"); ok {
			rest = user + ":xxxxx" + rest[at:]
		}
	}
	return prefix + rest
}
