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

	"inbox/strictjson"
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
// 404, a *BusyError when 429 or 5xx outlasts the retries, and otherwise
// with the last status (a redirect included: it is never followed). The
// error never holds the key.
func (c *Client) Redeliver(ctx context.Context, jobID string) error {
	u, err := c.jobURL("redeliver", jobID)
	if err != nil {
		return err
	}
	_, err = c.call(ctx, "redeliver", http.MethodPost, u+"/webhook/redeliver")
	return err
}

// Terminal reports whether a job status is one a job ends in: COMPLETED,
// ERROR or CANCELED.
func Terminal(status string) bool {
	switch strings.ToUpper(status) {
	case "COMPLETED", "ERROR", "CANCELED", "CANCELLED":
		return true
	}
	return false
}

// ErrForeignStatusURL is returned for a status URL that is not on the API's
// host: the key is sent to the API alone.
var ErrForeignStatusURL = errors.New("status URL is not on the API's host")

// maxStatusBody bounds the job status answer read.
const maxStatusBody = 64 << 10

// JobStatus reads jobID's status (GET /v1/jobs/{job_id}, or statusURL when
// it is not empty) with the key as a bearer token, as Redeliver does and
// with the same retries and errors (ErrUnknownJob on 404). statusURL must
// have the base URL's scheme and host, else ErrForeignStatusURL without a
// request. It fails too when the answer is not a JSON object with a
// non-empty "status".
func (c *Client) JobStatus(ctx context.Context, jobID, statusURL string) (string, error) {
	u, err := c.jobURL("job status", jobID)
	if err != nil {
		return "", err
	}
	if statusURL != "" {
		if u, err = c.CheckStatusURL(statusURL); err != nil {
			return "", fmt.Errorf("job status: %w", err)
		}
	}
	a, err := c.call(ctx, "job status", http.MethodGet, u)
	if err != nil {
		return "", err
	}
	var job struct {
		Status string `json:"status"`
	}
	// "status" as written, once: {"status":"RUNNING","Status":"COMPLETED"}
	// must not read as COMPLETED.
	if err := strictjson.Decode([]byte(a.body), &job, true); err != nil || job.Status == "" {
		return "", fmt.Errorf("job status: the answer (%s) names no status: %q", a.status, redact(a.body, c.APIKey))
	}
	return job.Status, nil
}

// CheckStatusURL returns statusURL when it is an absolute URL on the base
// URL's scheme and host (the key may go there), else an error wrapping
// ErrForeignStatusURL.
func (c *Client) CheckStatusURL(statusURL string) (string, error) {
	base, err := c.base()
	if err != nil {
		return "", err
	}
	b, _ := url.Parse(base)
	u, err := url.Parse(statusURL)
	if err != nil || u.User != nil || u.Fragment != "" || !strings.EqualFold(u.Scheme, b.Scheme) || !strings.EqualFold(u.Host, b.Host) {
		return "", fmt.Errorf("%w (%s): want a URL under %s", ErrForeignStatusURL, b.Scheme+"://"+b.Host, base)
	}
	return u.String(), nil
}

// jobURL returns the API's URL of jobID, /v1/jobs/{job_id}, after the
// checks Redeliver documents.
func (c *Client) jobURL(op, jobID string) (string, error) {
	if c.APIKey == "" {
		return "", fmt.Errorf("%s: no API key", op)
	}
	if jobID == "" || jobID == "." || jobID == ".." {
		return "", fmt.Errorf("%s: invalid job id %q", op, jobID)
	}
	base, err := c.base()
	if err != nil {
		return "", fmt.Errorf("%s: %w", op, err)
	}
	return base + "/v1/jobs/" + url.PathEscape(jobID), nil
}

// BusyError is a 429 or 5xx answer that outlasted the retries.
type BusyError struct {
	Op       string
	Status   string
	Attempts int
	// RetryAfter is the wait the last answer asked for (at most
	// MaxRetryWait), zero when it named none.
	RetryAfter time.Duration
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("%s: %s after %d attempts", e.Op, e.Status, e.Attempts)
}

// call sends method to u with the key and returns the 2xx answer, after
// the retries Redeliver documents.
func (c *Client) call(ctx context.Context, op, method, u string) (answer, error) {
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
		resp, err := c.send(ctx, hc, method, u)
		if err != nil {
			return answer{}, fmt.Errorf("%s: %w", op, err)
		}
		switch code := resp.code; {
		case code >= 200 && code < 300:
			return resp, nil
		case code == http.StatusUnauthorized || code == http.StatusForbidden:
			return answer{}, fmt.Errorf("%w (%s)", ErrKeyRejected, resp.status)
		case code == http.StatusNotFound:
			return answer{}, fmt.Errorf("%w (%s)", ErrUnknownJob, resp.status)
		case code != http.StatusTooManyRequests && code < 500:
			return answer{}, fmt.Errorf("%s: unexpected answer %s: %q", op, resp.status, redact(resp.body, c.APIKey))
		}
		if attempt >= c.Retries {
			var asked time.Duration
			if resp.retryAfter != "" {
				asked = retryAfter(resp.retryAfter, now(), 0)
			}
			return answer{}, &BusyError{Op: op, Status: resp.status, Attempts: attempt + 1, RetryAfter: asked}
		}
		wait := retryAfter(resp.retryAfter, now(), backoff)
		backoff *= 2
		if err := sleep(ctx, wait); err != nil {
			return answer{}, fmt.Errorf("%s: %w", op, err)
		}
	}
}

// answer is what call keeps of a response.
type answer struct {
	code       int
	status     string
	retryAfter string
	body       string
}

func (c *Client) send(ctx context.Context, hc *http.Client, method, u string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
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
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxStatusBody))
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
