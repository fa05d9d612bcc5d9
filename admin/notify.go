package admin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"inbox/config"
)

// Notification limits: a webhook that takes a message answers at once and
// briefly, and one that never answers must not hold cron's job.
const (
	defaultNotifyTimeout = 10 * time.Second
	maxNotifyAnswer      = 64 << 10 // read, then dropped, so the connection can be reused
	maxNotifyLines       = 100      // lines carried in a notification's text
)

// notice is the JSON alert --notify posts. Text is the message Slack,
// Mattermost and their kin show as is; the rest is for a receiver that
// reads fields. It carries what alert printed, never the database's
// address or any secret.
type notice struct {
	Text     string            `json:"text"`
	Host     string            `json:"host"`
	Check    string            `json:"check"` // parked, parked_every_hour, max_parked, quiet, failing_verification, destination_down, unreadable
	ExitCode int               `json:"exit_code"`
	At       time.Time         `json:"at"`
	Lines    []string          `json:"lines"`
	Findings []json.RawMessage `json:"findings,omitempty"` // what --json prints, an object each
	Changes  []noticeChange    `json:"changes,omitempty"`  // what each line says of its finding
}

// noticeChange is what a notice says of one finding: its key, and whether
// it opened, grew, repeated or resolved.
type noticeChange struct {
	Finding  string    `json:"finding"`
	Change   string    `json:"change"`
	Count    int64     `json:"count"`
	OpenedAt time.Time `json:"opened_at,omitzero"`
}

// notifier posts notices to the --notify endpoints.
type notifier struct {
	urls   []*url.URL
	client *http.Client
}

// errNotifyEmpty refuses a --notify or INBOX_NOTIFY that is set and names
// no URL, or holds an empty one ("", " , ", a trailing comma): an alert
// that was meant to be sent must not go nowhere without a word.
var errNotifyEmpty = errors.New("--notify (or INBOX_NOTIFY) is set with an empty URL: give http:// or https:// webhook URLs (INBOX_NOTIFY: comma-separated, none empty), or unset it to notify nowhere")

// newNotifier reads --notify and --notify-timeout. It fails on an empty
// URL or list (errNotifyEmpty), on a URL that is not http:// or https://
// with a host, or a timeout that is not positive; the error names the
// URL's scheme and host only, since the path of a chat webhook is its
// secret.
func newNotifier(c *cli.Context) (*notifier, error) {
	n := &notifier{client: &http.Client{
		Timeout: config.DurationOf(c, "notify-timeout").Get(),
		// A redirect is not followed: the message goes where it was told
		// to, and a 3xx is a failure to deliver it.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	raws := c.StringSlice("notify")
	if c.IsSet("notify") && len(raws) == 0 {
		return nil, errNotifyEmpty
	}
	for _, raw := range raws {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			return nil, errNotifyEmpty
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
			scheme := ""
			if err == nil {
				scheme = u.Scheme
			}
			return nil, fmt.Errorf("--notify: want an http:// or https:// URL with a host, got one of scheme %q", scheme)
		}
		n.urls = append(n.urls, u)
	}
	return n, nil
}

// scope is what alert remembers its findings under for n's endpoints
// (inbox.Alert's Scope): a digest of their URLs, never a URL, whose path
// may be a webhook's token; "" when there are none.
func (n *notifier) scope() string {
	if len(n.urls) == 0 {
		return ""
	}
	urls := make([]string, len(n.urls))
	for i, u := range n.urls {
		urls[i] = u.String()
	}
	slices.Sort(urls)
	sum := sha256.Sum256([]byte(strings.Join(slices.Compact(urls), "\n")))
	return " --notify " + hex.EncodeToString(sum[:8])
}

// dbSecrets are the parts of --db a notice must not carry: the password
// of a PostgreSQL URL, as given and escaped, and PGPASSWORD's.
func dbSecrets(db string) []string {
	var secrets []string
	if u, err := url.Parse(db); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok {
			secrets = append(secrets, pw, url.QueryEscape(pw))
		}
	}
	return append(secrets, os.Getenv("PGPASSWORD"))
}

// endpoint names u in messages: its scheme and host, not the path or the
// query, which may hold the webhook's token.
func endpoint(u *url.URL) string { return u.Scheme + "://" + u.Host }

// send posts nt to every endpoint, each within the timeout, and returns
// one error per endpoint that did not answer 2xx.
func (n *notifier) send(ctx context.Context, nt notice) []error {
	body, err := json.Marshal(nt)
	if err != nil {
		return []error{fmt.Errorf("notify: %w", err)}
	}
	var errs []error
	for _, u := range n.urls {
		if err := n.post(ctx, u, body); err != nil {
			errs = append(errs, fmt.Errorf("notify %s: %w", endpoint(u), err))
		}
	}
	return errs
}

func (n *notifier) post(ctx context.Context, u *url.URL, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return errors.New("cannot make the request")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "inbox-alert")
	resp, err := n.client.Do(req)
	if err != nil {
		// url.Error quotes the whole URL: keep only what went wrong.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxNotifyAnswer))
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return fmt.Errorf("answered %s (redirects are not followed)", resp.Status)
	case resp.StatusCode < 200 || resp.StatusCode >= 300:
		return fmt.Errorf("answered %s", resp.Status)
	}
	return nil
}

// newNotice builds the notice for what a check printed: text its human
// lines, findings its JSON ones. secrets are removed from every string
// (the database URL's password, should an error quote it).
func newNotice(host, check string, code int, text, findings []byte, secrets ...string) notice {
	scrub := func(s string) string {
		for _, v := range secrets {
			if v != "" {
				s = strings.ReplaceAll(s, v, "[redacted]")
			}
		}
		return s
	}
	nt := notice{Host: host, Check: check, ExitCode: code, At: time.Now().UTC(), Lines: []string{}}
	for l := range strings.SplitSeq(strings.TrimRight(string(text), "\n"), "\n") {
		if l = strings.TrimRight(l, " "); l != "" {
			nt.Lines = append(nt.Lines, scrub(l))
		}
	}
	for l := range bytes.SplitSeq(findings, []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 && json.Valid(l) {
			nt.Findings = append(nt.Findings, json.RawMessage(scrub(string(l))))
		}
	}
	shown := nt.Lines[:min(len(nt.Lines), maxNotifyLines)]
	nt.Text = fmt.Sprintf("inbox alert on %s (%s):\n%s", host, check, strings.Join(shown, "\n"))
	if len(shown) < len(nt.Lines) {
		nt.Text += fmt.Sprintf("\n… and %d more lines", len(nt.Lines)-len(shown))
	}
	return nt
}
