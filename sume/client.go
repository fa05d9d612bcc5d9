package sume

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultAPIURL is the Sume API's base URL.
const DefaultAPIURL = "https://api.sume.com"

// Retry bounds for Client.
const (
	DefaultRetries = 3
	// firstBackoff is the wait before the first retry when the answer names
	// none; it doubles on each retry.
	firstBackoff = time.Second
	// MaxRetryWait caps any wait, Retry-After included: a provider asking for
	// an hour is better answered by an operator running the command later.
	MaxRetryWait = 30 * time.Second
	// requestTimeout bounds one attempt.
	requestTimeout = 30 * time.Second
	// maxErrorBody is how much of an unexpected answer's body an error
	// quotes (%q escapes whatever is unprintable).
	maxErrorBody = 200
)

// API errors. Their texts never hold the API key.
var (
	ErrKeyRejected = errors.New("the API key was refused: it lacks jobs:write, or is not a valid key")
	ErrUnknownJob  = errors.New("unknown job: the provider has no job with this id")
)

// Client calls the Sume API.
type Client struct {
	// BaseURL is the API's base URL, DefaultAPIURL when empty. It must be
	// https, or http to a loopback host (a local stand-in): the key is never
	// sent in clear across a network.
	BaseURL string
	// APIKey is sent as a bearer token and never appears in an error.
	APIKey string
	// Retries is how many times a 429 or 5xx answer is retried; negative
	// means none.
	Retries int
	// HTTP is the client used; one with requestTimeout when nil. Redirects
	// are never followed, whatever its CheckRedirect says: the key would go
	// with them.
	HTTP *http.Client
	// Sleep waits between attempts; a timer that ctx can cut short when nil.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now reads a Retry-After given as a date; time.Now when nil.
	Now func() time.Time
}

// Check reports whether c.BaseURL is usable: https, or http to a loopback
// host. Callers check once before redelivering many jobs.
func (c *Client) Check() error {
	_, err := c.base()
	return err
}

func (c *Client) base() (string, error) {
	base := c.BaseURL
	if base == "" {
		base = DefaultAPIURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("invalid API URL %q: want https://host", base)
	}
	if u.Scheme == "http" && !loopback(u.Hostname()) {
		return "", fmt.Errorf("API URL %q is plain http: the key would cross the network in clear; use https (http only to a loopback host)", base)
	}
	return strings.TrimRight(base, "/"), nil
}

func loopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// Redeliver asks Sume to send jobID's terminal webhook again (POST
// /v1/jobs/{job_id}/webhook/redeliver, which needs a key with jobs:write).
// It retries 429 and 5xx answers up to c.Retries times, waiting as
// Retry-After says (seconds or a date), else 1 s doubling, never more than
// MaxRetryWait. It fails without a request when the base URL fails Check or
// jobID is empty, "." or ".." (segments a URL resolves away, sending the key
// to another endpoint); with ErrKeyRejected on 401 or 403, ErrUnknownJob on
// 404, and otherwise with the last status (a redirect included: it is never
// followed). The error never holds the key.
func (c *Client) Redeliver(ctx context.Context, jobID string) error {
	if c.APIKey == "" {
		return errors.New("redeliver: no API key")
	}
	if jobID == "" || jobID == "." || jobID == ".." {
		return fmt.Errorf("redeliver: invalid job id %q", jobID)
	}
	base, err := c.base()
	if err != nil {
		return fmt.Errorf("redeliver: %w", err)
	}
	u := base + "/v1/jobs/" + url.PathEscape(jobID) + "/webhook/redeliver"
	hc := &http.Client{Timeout: requestTimeout}
	if c.HTTP != nil {
		copied := *c.HTTP
		hc = &copied
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	sleep, now := c.Sleep, c.Now
	if sleep == nil {
		sleep = sleepCtx
	}
	if now == nil {
		now = time.Now
	}

	backoff := firstBackoff
	for attempt := 0; ; attempt++ {
		resp, err := c.post(ctx, hc, u)
		if err != nil {
			return fmt.Errorf("redeliver: %w", err)
		}
		switch code := resp.code; {
		case code >= 200 && code < 300:
			return nil
		case code == http.StatusUnauthorized || code == http.StatusForbidden:
			return fmt.Errorf("%w (%s)", ErrKeyRejected, resp.status)
		case code == http.StatusNotFound:
			return fmt.Errorf("%w (%s)", ErrUnknownJob, resp.status)
		case code != http.StatusTooManyRequests && code < 500:
			return fmt.Errorf("redeliver: unexpected answer %s: %q", resp.status, redact(resp.body, c.APIKey))
		}
		if attempt >= c.Retries {
			return fmt.Errorf("redeliver: %s after %d attempts", resp.status, attempt+1)
		}
		wait := retryAfter(resp.retryAfter, now(), backoff)
		backoff *= 2
		if err := sleep(ctx, wait); err != nil {
			return fmt.Errorf("redeliver: %w", err)
		}
	}
}

// answer is what Redeliver keeps of a response.
type answer struct {
	code       int
	status     string
	retryAfter string
	body       string
}

func (c *Client) post(ctx context.Context, hc *http.Client, u string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+c.APIKey)
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	// Enough to redact a key that straddles the part an error quotes, and
	// to let the connection be reused.
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return answer{code: resp.StatusCode, status: resp.Status,
		retryAfter: resp.Header.Get("Retry-After"), body: string(body)}, nil
}

// retryAfter returns the wait a Retry-After value asks for (delay seconds
// or an HTTP date), fallback when it is absent or unreadable, and never
// more than MaxRetryWait.
func retryAfter(v string, now time.Time, fallback time.Duration) time.Duration {
	wait := fallback
	if secs, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && secs >= 0 {
		wait = time.Duration(min(secs, int64(MaxRetryWait/time.Second))) * time.Second
	} else if at, err := http.ParseTime(v); err == nil {
		wait = max(at.Sub(now), 0)
	}
	return min(wait, MaxRetryWait)
}

// redact returns the start of an answer's body for an error: the key
// removed (an answer may echo the request), then cut to maxErrorBody bytes.
func redact(body, key string) string {
	body = strings.ReplaceAll(body, key, "[redacted]")
	if len(body) > maxErrorBody {
		body = strings.ToValidUTF8(body[:maxErrorBody], "") + "..."
	}
	return body
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
