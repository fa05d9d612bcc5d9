package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"inbox/sqlite/sqlitetest"
	"inbox/sume"
)

// rotated is the second secret the walk's server accepts (contract row 8).
const rotated = "e2e-rotated-secret"

// bodyKey is the id of a row keyed by its bytes.
func bodyKey(body string) string {
	sum := sha256.Sum256([]byte(body))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// chunked encodes body in chunks of n bytes.
func chunked(body string, n int) string {
	var b strings.Builder
	for len(body) > 0 {
		c := body[:min(n, len(body))]
		body = body[len(c):]
		fmt.Fprintf(&b, "%x\r\n%s\r\n", len(c), c)
	}
	return b.String() + "0\r\n\r\n"
}

// TestContract walks ../shared/RECEIVER-CONTRACT.md row by row against the
// real binary over a real socket, with requests written by hand, and then
// bodies that lie about their length. After each request it reads the
// database as another process would. It runs beside the parallel tests:
// its commits have a second of busy timeout, and its read timeouts 1.5 s
// of slack, for their load.
func TestContract(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inbox.db")
	srv := startServer(t, db, "--secret", e2eSecret, "--secret", rotated,
		"--max-body", "1KiB", "--max-request", "4KiB", "--busy-timeout", "1s",
		"--read-header-timeout", "1s", "--read-timeout", "2s")
	now := time.Now()
	ts := strconv.FormatInt(now.Unix(), 10)
	path := "/webhooks/sume"
	mac := func(body, secret string) string { return hex.EncodeToString(sume.Sign(secret, ts, []byte(body))) }
	withSig := func(body, sig string) []string {
		return []string{sume.HeaderTimestamp + ": " + ts, sume.HeaderSignature + ": " + sig}
	}
	withTS := func(body, stamp string) []string {
		return []string{sume.HeaderTimestamp + ": " + stamp, sume.HeaderSignature + ": sume-v1=" + mac(body, e2eSecret)}
	}
	signed := func(body string) []string { return signedHeaders(body, now, e2eSecret) }
	post := func(headers []string, body string) string { return rawRequest("POST", path, headers, body) }

	// Rows 1-7: rejected, nothing written.
	b := job("job_rejected")
	big := `{"event":"job.completed","job_id":"job_big","pad":"` + strings.Repeat("x", 5000) + `"}`
	rejected := []struct {
		name string
		req  string
		want int
	}{
		{"1 GET", rawRequest("GET", path, nil, ""), 405},
		{"1 PUT, signed", rawRequest("PUT", path, signed(b), b), 405},
		{"1 DELETE", rawRequest("DELETE", path, nil, ""), 405},
		// Headers only: a 413 rather than a 400 at the read timeout shows the
		// answer did not wait for the body.
		{"2 declared length above the cap, the body never sent", post(append(signed(big), fmt.Sprintf("Content-Length: %d", len(big))), ""), 413},
		{"3 chunked body growing past the cap", post(append(signed(big), "Transfer-Encoding: chunked"), chunked(big, 1000)), 413},
		{"4 no signature header", post([]string{sume.HeaderTimestamp + ": " + ts}, b), 401},
		{"4 empty signature header", post(withSig(b, ""), b), 401},
		{"4 no sume-v1 entry", post(withSig(b, "v0="+mac(b, e2eSecret)+",sume-v2=abc"), b), 401},
		{"5 entry of 63 hex characters", post(withSig(b, "sume-v1="+mac(b, e2eSecret)[:63]), b), 401},
		{"5 entry in uppercase hex", post(withSig(b, "sume-v1="+strings.ToUpper(mac(b, e2eSecret))), b), 401},
		{"5 entry of 64 non-hex characters", post(withSig(b, "sume-v1="+strings.Repeat("g", 64)), b), 401},
		{"5 a malformed entry beside a valid one", post(withSig(b, "sume-v1=xyz,sume-v1="+mac(b, e2eSecret)), b), 401},
		{"6 no timestamp", post([]string{sume.HeaderSignature + ": sume-v1=" + mac(b, e2eSecret)}, b), 401},
		{"6 timestamp with a sign", post(withTS(b, "+"+ts), b), 401},
		{"6 timestamp with a leading zero", post(withTS(b, "0"+ts), b), 401},
		{"6 timestamp with a fraction", post(withTS(b, ts+".0"), b), 401},
		{"6 timestamp in milliseconds", post(withTS(b, ts+"000"), b), 401},
		{"6 timestamp twice", post(append(signed(b), sume.HeaderTimestamp+": "+ts), b), 401},
		// Past the 300 s tolerance by more than the walk takes: the receiver's
		// tests, on a fixed clock, check the boundary to the second.
		{"6 330 s in the past", post(signedHeaders(b, now.Add(-330*time.Second), e2eSecret), b), 401},
		{"6 330 s in the future", post(signedHeaders(b, now.Add(330*time.Second), e2eSecret), b), 401},
		{"7 another secret", post(signedHeaders(b, now, "not-ours"), b), 401},
		{"7 re-serialized JSON", post(signed(`{"event": "job.completed", "job_id": "job_rejected"}`), `{"event":"job.completed","job_id":"job_rejected"}`), 401},
		{"7 tampered body", post(signed(b), strings.Replace(b, "COMPLETED", "COMPLETEX", 1)), 401},
	}
	for _, tt := range rejected {
		t.Run(tt.name, func(t *testing.T) {
			before := readRows(t, db)
			resp, body := roundTrip(t, srv.url, tt.req)
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.want)
			}
			if body != "" {
				t.Errorf("body %q, want none (no oracle)", body)
			}
			if got := resp.Header.Get("WWW-Authenticate"); tt.want == 401 && got != `sume-v1 realm="webhooks"` {
				t.Errorf("WWW-Authenticate %q, want the one challenge for every cause", got)
			}
			if got := resp.Header.Get("Allow"); tt.want == 405 && got != "POST" {
				t.Errorf("Allow %q, want POST", got)
			}
			if tt.want == 413 && !resp.Close {
				t.Error("413 without Connection: close, though the body was not read")
			}
			if after := readRows(t, db); len(after) != len(before) {
				t.Errorf("%d rows written, want none", len(after)-len(before))
			}
		})
	}

	// Rows 8-18: verified, answered 204, and the row is as the contract says.
	// Each request is sent twice, as the provider's retry would: the second
	// lands on the same row.
	pad := `{"event":"job.completed","job_id":"job_w13","status":"COMPLETED","pad":"` + strings.Repeat("x", 1100) + `"}`
	tooLarge := func(id string) string {
		return `{"event":"job.completed","job_id":"` + id + `","status":"COMPLETED","payload":null,"error":{"code":"payload_too_large","result_url":"https://api.sume.test/v1/jobs/` + id + `/result"}}`
	}
	stored := []struct {
		name    string
		headers func(body string) []string
		body    string
		id      string
		status  string
		reason  string
		check   func(t *testing.T, r storedRow)
	}{
		{name: "8 rotation: one entry valid for the second secret", body: job("job_w8a"), id: "job_w8a", status: "new",
			headers: func(body string) []string {
				return withSig(body, "sume-v1="+mac(body, "not-ours")+", sume-v1="+mac(body, rotated))
			}},
		{name: "8 an entry of another scheme beside a valid one", body: job("job_w8b"), id: "job_w8b", status: "new",
			headers: func(body string) []string { return withSig(body, "v0=whatever,sume-v1="+mac(body, e2eSecret)) }},
		{name: "9 not JSON", body: "not json", id: bodyKey("not json"), status: "parked", reason: "unparseable"},
		{name: "9 empty", body: "", id: bodyKey(""), status: "parked", reason: "unparseable"},
		{name: "9 not an object", body: `["job_w9"]`, id: bodyKey(`["job_w9"]`), status: "parked", reason: "unparseable"},
		{name: "10 no job_id", body: `{"event":"job.completed","status":"COMPLETED"}`, id: bodyKey(`{"event":"job.completed","status":"COMPLETED"}`), status: "parked", reason: "missing_job_id"},
		{name: "10 numeric job_id", body: `{"event":"job.completed","job_id":10}`, id: bodyKey(`{"event":"job.completed","job_id":10}`), status: "parked", reason: "missing_job_id"},
		{name: "11 unknown event", body: `{"event":"job.exploded","job_id":"job_w11"}`, id: "job_w11", status: "parked", reason: "unknown_event",
			check: func(t *testing.T, r storedRow) {
				if r.Event != "job.exploded" {
					t.Errorf("event %q, want job.exploded kept", r.Event)
				}
			}},
		{name: "12 payload too large", body: tooLarge("job_w12"), id: "job_w12", status: "parked", reason: "payload_too_large",
			check: func(t *testing.T, r storedRow) {
				if r.ResultURL != "https://api.sume.test/v1/jobs/job_w12/result" {
					t.Errorf("result_url %q", r.ResultURL)
				}
			}},
		{name: "13 above the body limit, within the cap", body: pad, id: "job_w13", status: "parked", reason: "too_large"},
		{name: "14 test ping", body: `{"event":"webhook.test","request_id":"req_w14"}`, id: bodyKey(`{"event":"webhook.test","request_id":"req_w14"}`), status: "ignored"},
		{name: "15 the same job again", body: job("job_w15"), id: "job_w15", status: "new"},
		{name: "18 a storable job event", body: `{"event":"job.failed","job_id":"job_w18","status":"ERROR","error":{"code":"render_failed"}}`, id: "job_w18", status: "new"},
	}
	for _, tt := range stored {
		t.Run(tt.name, func(t *testing.T) {
			headers := signed
			if tt.headers != nil {
				headers = tt.headers
			}
			for attempt := 1; attempt <= 2; attempt++ {
				if resp, body := roundTrip(t, srv.url, post(headers(tt.body), tt.body)); resp.StatusCode != 204 || body != "" {
					t.Fatalf("attempt %d: status %d, body %q; want 204 and none", attempt, resp.StatusCode, body)
				}
			}
			r, ok := readRows(t, db)[tt.id]
			if !ok {
				t.Fatalf("no row %s", tt.id)
			}
			if r.Status != tt.status || r.Reason != tt.reason || r.Body != tt.body || r.Deliveries != 2 {
				t.Errorf("row = %s %q, %d bytes, %d deliveries; want %s %q, the %d bytes sent, 2 deliveries",
					r.Status, r.Reason, len(r.Body), r.Deliveries, tt.status, tt.reason, len(tt.body))
			}
			if tt.check != nil {
				tt.check(t, r)
			}
		})
	}

	send204 := func(t *testing.T, body string) {
		t.Helper()
		if resp, _ := roundTrip(t, srv.url, post(signed(body), body)); resp.StatusCode != 204 {
			t.Fatalf("status %d, want 204", resp.StatusCode)
		}
	}
	t.Run("16 the same job with another event: parked conflict beside", func(t *testing.T) {
		send204(t, job("job_w16"))
		other := `{"event":"job.canceled","job_id":"job_w16","status":"ERROR"}`
		send204(t, other)
		rows := readRows(t, db)
		if r := rows["job_w16"]; r.Status != "new" || r.Body != job("job_w16") {
			t.Errorf("the job's row = %+v, want it untouched", r)
		}
		if r := rows[bodyKey(other)]; r.Status != "parked" || r.Reason != "conflict" || r.Body != other {
			t.Errorf("beside it = %+v, want parked conflict", r)
		}
	})
	t.Run("17 a parked job becomes new", func(t *testing.T) {
		send204(t, tooLarge("job_w17"))
		send204(t, job("job_w17"))
		if r := readRows(t, db)["job_w17"]; r.Status != "new" || r.Reason != "" || r.Body != job("job_w17") || r.Deliveries != 2 {
			t.Errorf("row = %+v, want new with the storable body", r)
		}
	})
	t.Run("19 the store cannot commit", func(t *testing.T) {
		release := sqlitetest.HoldWriteLock(t, db)
		resp, body := roundTrip(t, srv.url, post(signed(job("job_w19")), job("job_w19")))
		release()
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || body != "" {
			t.Fatalf("status %d, Retry-After %q, body %q; want 503 with Retry-After and no body", resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
		if _, ok := readRows(t, db)["job_w19"]; ok {
			t.Fatal("stored while the store could not commit")
		}
		send204(t, job("job_w19"))
	})

	lyingLengths(t, srv, db)

	t.Run("the log: a line per request, never the secret, a signature or a body", func(t *testing.T) {
		logs := srv.logs.String()
		for _, bad := range []string{e2eSecret, rotated, mac(b, e2eSecret), mac(job("job_w8a"), rotated),
			"render_failed", "api.sume.test", strings.Repeat("x", 100)} {
			if strings.Contains(logs, bad) {
				t.Errorf("the log holds %q", bad)
			}
		}
		var found bool
		for line := range strings.Lines(logs) {
			var l struct {
				Message, Outcome, Job, Row string
				Status                     int
				Size                       int64
				Duration                   float64
			}
			if json.Unmarshal([]byte(line), &l) != nil || l.Message != "delivery" || l.Job != "job_w18" {
				continue
			}
			found = true
			if l.Status != 204 || l.Outcome == "" || l.Row != "job_w18" || l.Size == 0 || l.Duration <= 0 {
				t.Errorf("log line = %s", line)
			}
		}
		if !found {
			t.Error("no log line for job_w18")
		}
	})

	t.Run("20 shutting down", func(t *testing.T) {
		stopWithRequestInFlight(t, srv, holdRequest(t, srv, job("job_w20"), 1))
		if _, ok := readRows(t, db)["job_w20"]; !ok {
			t.Error("the request in flight at shutdown was not stored")
		}
	})
	t.Run("21 no secret: refuses to start", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "inbox.db")
		for _, secret := range []string{"", " ", "good,"} {
			_, errOut, code := runCLI(t, []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + secret}, "serve", "--db", db, "--addr", "127.0.0.1:0")
			if code == 0 {
				t.Fatalf("secret %q: serve started", secret)
			}
			if !strings.Contains(errOut, "secret") || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
				t.Errorf("secret %q: want one line naming the secret, got %q", secret, errOut)
			}
		}
		if _, err := os.Stat(db); err == nil {
			t.Error("serve created the database before refusing to start")
		}
	})
}

// lyingLengths sends bodies whose Content-Length is not what is sent. The
// signature in each is valid for the bytes that do arrive, so only the
// framing stands between them and the inbox.
func lyingLengths(t *testing.T, srv *server, db string) {
	path := "/webhooks/sume"
	lie := func(body string, declared int) string {
		return rawRequest("POST", path, append(signedHeaders(body, time.Now(), e2eSecret), "Content-Length: "+strconv.Itoa(declared)), body)
	}
	notStored := func(t *testing.T, id string) {
		t.Helper()
		if _, ok := readRows(t, db)[id]; ok {
			t.Errorf("%s stored from a truncated body", id)
		}
	}

	t.Run("length above what is sent, then silence: given up at the read timeout", func(t *testing.T) {
		c := dial(t, srv.url)
		start := time.Now()
		c.write(t, lie(job("job_short_stall"), len(job("job_short_stall"))+100))
		resp, _, err := c.response(4 * time.Second) // --read-timeout 2s, and slack
		if err == nil && resp.StatusCode < 300 {
			t.Fatalf("status %d for a body that never ended", resp.StatusCode)
		}
		if took := time.Since(start); took > 3500*time.Millisecond {
			t.Errorf("held for %v, want about the 2s read timeout", took)
		}
		notStored(t, "job_short_stall")
	})
	t.Run("length above what is sent, then end of stream: 400", func(t *testing.T) {
		c := dial(t, srv.url)
		c.write(t, lie(job("job_short_eof"), len(job("job_short_eof"))+100))
		c.Conn.(interface{ CloseWrite() error }).CloseWrite()
		resp, _, err := c.response(2 * time.Second)
		if err != nil || resp.StatusCode != 400 {
			t.Fatalf("got %v, %v; want 400", resp, err)
		}
		notStored(t, "job_short_eof")
	})
	t.Run("length below what is sent: the rest is the next request", func(t *testing.T) {
		first, second := job("job_long_1"), job("job_long_2")
		c := dial(t, srv.url)
		c.write(t, lie(first, len(first))+rawRequest("POST", path, signedHeaders(second, time.Now(), e2eSecret), second))
		for i, id := range []string{"job_long_1", "job_long_2"} {
			resp, _, err := c.response(2 * time.Second)
			if err != nil || resp.StatusCode != 204 {
				t.Fatalf("response %d: %v, %v; want 204", i+1, resp, err)
			}
			if r := readRows(t, db)[id]; r.Body != job(id) {
				t.Errorf("%s stored %q, want exactly its own body", id, r.Body)
			}
		}
	})
	t.Run("length below what is sent, the rest garbage: 400 for it", func(t *testing.T) {
		body := job("job_long_garbage")
		c := dial(t, srv.url)
		c.write(t, lie(body, len(body))+`,"smuggled":true}`+"\r\n\r\n")
		if resp, _, err := c.response(2 * time.Second); err != nil || resp.StatusCode != 204 {
			t.Fatalf("first: %v, %v; want 204", resp, err)
		}
		if resp, _, err := c.response(2 * time.Second); err != nil || resp.StatusCode != 400 {
			t.Fatalf("the rest: %v, %v; want 400", resp, err)
		}
		if r := readRows(t, db)["job_long_garbage"]; r.Body != body {
			t.Errorf("stored %q, want exactly the declared bytes", r.Body)
		}
	})
	t.Run("two Content-Lengths that disagree: 400", func(t *testing.T) {
		body := job("job_two_lengths")
		req := rawRequest("POST", path, append(signedHeaders(body, time.Now(), e2eSecret),
			"Content-Length: "+strconv.Itoa(len(body)), "Content-Length: 5"), body)
		if resp, _ := roundTrip(t, srv.url, req); resp.StatusCode != 400 {
			t.Fatalf("status %d, want 400", resp.StatusCode)
		}
		notStored(t, "job_two_lengths")
	})
	t.Run("chunked beside a shorter Content-Length: rejected or read whole", func(t *testing.T) {
		body := job("job_chunked_and_length")
		req := rawRequest("POST", path, append(signedHeaders(body, time.Now(), e2eSecret),
			"Content-Length: 10", "Transfer-Encoding: chunked"), chunked(body, 16))
		resp, _ := roundTrip(t, srv.url, req)
		r, ok := readRows(t, db)["job_chunked_and_length"]
		switch {
		case resp.StatusCode == 400 && !ok:
			t.Log("rejected")
		case resp.StatusCode == 204 && r.Body == body:
			t.Log("read whole, as chunked")
		default:
			t.Errorf("status %d, stored %v %q; want 400 and nothing, or 204 and the whole body", resp.StatusCode, ok, r.Body)
		}
	})
}
