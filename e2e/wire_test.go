package e2e

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"inbox/metrics/metricstest"
	"inbox/sume"
)

// signedHeaders returns the header lines a Sume delivery of body carries,
// signed at `at` with secret.
func signedHeaders(body string, at time.Time, secret string) []string {
	ts := strconv.FormatInt(at.Unix(), 10)
	return []string{
		sume.HeaderTimestamp + ": " + ts,
		sume.HeaderSignature + ": " + sume.SignatureHeader(ts, []byte(body), secret),
	}
}

// rawRequest writes a request by hand, so it can lie: the request line, a
// Host, the header lines given, a Content-Length of the body unless a
// header line sets one or the body is chunked, and the body.
func rawRequest(method, path string, headers []string, body string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: inbox.test\r\n", method, path)
	own := false
	for _, h := range headers {
		lower := strings.ToLower(h)
		own = own || strings.HasPrefix(lower, "content-length:") || strings.HasPrefix(lower, "transfer-encoding:")
		b.WriteString(h + "\r\n")
	}
	if !own {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	b.WriteString("\r\n" + body)
	return b.String()
}

// conn is a raw client connection to a server.
type conn struct {
	net.Conn
	r *bufio.Reader
}

// dial opens a raw connection to the host of rawURL.
func dial(t testing.TB, rawURL string) *conn {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return &conn{Conn: c, r: bufio.NewReader(c)}
}

func (c *conn) write(t testing.TB, s string) {
	t.Helper()
	if _, err := io.WriteString(c, s); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// response reads the next response, waiting at most d; its body is read
// and returned beside it.
func (c *conn) response(d time.Duration) (*http.Response, string, error) {
	c.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return nil, "", err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body), err
}

// roundTrip sends req on a new connection and returns the answer.
func roundTrip(t testing.TB, rawURL, req string) (*http.Response, string) {
	t.Helper()
	c := dial(t, rawURL)
	c.write(t, req)
	resp, body, err := c.response(5 * time.Second)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	return resp, body
}

// heldRequest is a signed delivery sent up to half of its body: the server
// is handling it, waiting for the rest.
type heldRequest struct {
	c    *conn
	rest string
}

// holdRequest starts a delivery of body and waits until the server counts
// it in flight (want is the count then, with any others held).
func holdRequest(t testing.TB, srv *server, body string, want int) *heldRequest {
	t.Helper()
	raw := rawRequest("POST", "/webhooks/sume", signedHeaders(body, time.Now(), e2eSecret), body)
	cut := len(raw) - len(body)/2
	c := dial(t, srv.url)
	c.write(t, raw[:cut])
	waitFor(t, fmt.Sprintf("%d requests in flight", want), func() bool {
		return metricstest.Scrape(t, srv.admin+"/metrics")["inbox_requests_in_flight"] == float64(want)
	})
	return &heldRequest{c: c, rest: raw[cut:]}
}

// finish sends the rest of the body and returns the answer.
func (h *heldRequest) finish(t testing.TB) *http.Response {
	t.Helper()
	h.c.write(t, h.rest)
	resp, _, err := h.c.response(5 * time.Second)
	if err != nil {
		t.Fatalf("held request: %v", err)
	}
	return resp
}

// waitFor polls cond for up to 5 seconds.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// storedRow is what a test reads back of a row.
type storedRow struct {
	ID, Status, Reason, Event, ResultURL, Body string
	Deliveries                                 int
}

// readRows opens db as another process would and returns every row by id.
func readRows(t testing.TB, db string) map[string]storedRow {
	t.Helper()
	conn, err := sql.Open("sqlite", db+"?_pragma=query_only(ON)&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(`SELECT id, status, COALESCE(reason, ''), COALESCE(event, ''),
		COALESCE(result_url, ''), body, deliveries FROM events`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]storedRow{}
	for rows.Next() {
		var r storedRow
		var body []byte
		if err := rows.Scan(&r.ID, &r.Status, &r.Reason, &r.Event, &r.ResultURL, &body, &r.Deliveries); err != nil {
			t.Fatal(err)
		}
		r.Body = string(body)
		out[r.ID] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// startLoad drives signed deliveries at srv from 8 connections, and
// returns once n of them are acknowledged; stop ends the load and waits
// for its last request.
func startLoad(t *testing.T, srv *server, prefix string, n int) (l *load, stop func()) {
	t.Helper()
	l = &load{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.run(ctx, func() string { return srv.url }, 8, prefix); close(done) }()
	stop = sync.OnceFunc(func() { cancel(); <-done })
	t.Cleanup(stop)
	waitFor(t, fmt.Sprintf("%d deliveries acknowledged", n), func() bool { acked, _, _ := l.snapshot(); return acked >= n })
	return l, stop
}
