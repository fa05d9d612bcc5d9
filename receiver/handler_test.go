package receiver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"inbox/inbox"
	"inbox/scheme"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
	"inbox/sume"
)

const (
	testMaxBody = 2 << 10
	testHardCap = 8 << 10
	testSecret  = "whsec_current_0123456789"
	otherSecret = "whsec_previous_9876543210"
)

var testNow = time.Unix(1_800_000_000, 0)

// env is a real handler on a real SQLite file.
type env struct {
	h     *Handler
	store *sqlite.Store
	logs  *bytes.Buffer
}

func newEnv(t *testing.T, store *sqlite.Store) env {
	t.Helper()
	if store == nil {
		store = sqlitetest.MustOpen(t, sqlite.Options{})
	}
	logs := &bytes.Buffer{}
	h, err := NewHandler(store, Config{
		Keys:    keys(testSecret, otherSecret),
		Scheme:  scheme.Sume{Tolerance: 5 * time.Minute},
		Rules:   inbox.Rules{Events: []string{"job.completed", "job.failed", "job.canceled"}, MaxBody: testMaxBody},
		HardCap: testHardCap,
		Now:     func() time.Time { return testNow },
	}, zerolog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	return env{h: h, store: store, logs: logs}
}

// post sends body signed now with testSecret.
func (e env) post(t *testing.T, body string) *httptest.ResponseRecorder {
	t.Helper()
	return e.do(t, signedRequest(body, testNow, testSecret))
}

func (e env) do(t *testing.T, r *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	return w
}

func signedRequest(body string, at time.Time, secrets ...string) *http.Request {
	ts := strconv.FormatInt(at.Unix(), 10)
	r := httptest.NewRequest(http.MethodPost, "/webhooks/sume", strings.NewReader(body))
	r.Header.Set(sume.HeaderTimestamp, ts)
	r.Header.Set(sume.HeaderSignature, sume.SignatureHeader(ts, []byte(body), secrets...))
	return r
}

func (e env) rows(t *testing.T) []inbox.Event {
	t.Helper()
	rows, err := e.store.List(context.Background(), inbox.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func (e env) get(t *testing.T, id string) inbox.Event {
	t.Helper()
	ev, err := e.store.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return ev
}

// bodyKey is the id of a row keyed by its bytes.
func bodyKey(body string) string {
	sum := sha256.Sum256([]byte(body))
	return "sha256:" + hex.EncodeToString(sum[:])
}

const completed = `{"event":"job.completed","job_id":"job_1","status":"COMPLETED","payload":{"artifacts":[{"url":"https://cdn.example/v.mp4"}]}}`

// TestRejected covers contract rows 1-7: nothing unverified is written.
func TestRejected(t *testing.T) {
	t.Parallel()
	mac := hex.EncodeToString(sume.Sign(testSecret, strconv.FormatInt(testNow.Unix(), 10), []byte(completed)))
	withHeaders := func(ts, sig string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/webhooks/sume", strings.NewReader(completed))
		if ts != "" {
			r.Header.Set(sume.HeaderTimestamp, ts)
		}
		if sig != "" {
			r.Header.Set(sume.HeaderSignature, sig)
		}
		return r
	}
	now := strconv.FormatInt(testNow.Unix(), 10)
	tests := []struct {
		name string
		req  func() *http.Request
		want int
	}{
		{"1 GET", func() *http.Request { return httptest.NewRequest(http.MethodGet, "/webhooks/sume", nil) }, 405},
		{"1 PUT, signed", func() *http.Request {
			r := signedRequest(completed, testNow, testSecret)
			r.Method = http.MethodPut
			return r
		}, 405},
		{"4 no signature header", func() *http.Request { return withHeaders(now, "") }, 401},
		{"4 no sume-v1 entry", func() *http.Request { return withHeaders(now, "v1="+mac) }, 401},
		{"5 short entry", func() *http.Request { return withHeaders(now, "sume-v1="+mac[:60]) }, 401},
		{"5 garbage entry", func() *http.Request { return withHeaders(now, "sume-v1=\x00\xff"+mac) }, 401},
		{"6 no timestamp", func() *http.Request { return withHeaders("", "sume-v1="+mac) }, 401},
		{"6 timestamp not canonical", func() *http.Request { return withHeaders("0"+now, "sume-v1="+mac) }, 401},
		{"6 stale", func() *http.Request { return signedRequest(completed, testNow.Add(-301*time.Second), testSecret) }, 401},
		{"6 future", func() *http.Request { return signedRequest(completed, testNow.Add(301*time.Second), testSecret) }, 401},
		{"6 timestamp sent twice", func() *http.Request {
			r := signedRequest(completed, testNow, testSecret)
			r.Header.Add(sume.HeaderTimestamp, now)
			return r
		}, 401},
		{"7 another secret", func() *http.Request { return signedRequest(completed, testNow, "not-ours") }, 401},
		{"7 tampered body", func() *http.Request {
			r := signedRequest(completed, testNow, testSecret)
			r.Body = io.NopCloser(strings.NewReader(strings.Replace(completed, "job_1", "job_2", 1)))
			return r
		}, 401},
		{"7 re-serialized JSON", func() *http.Request {
			r := signedRequest(`{"event": "job.completed", "job_id": "job_1"}`, testNow, testSecret)
			r.Body = io.NopCloser(strings.NewReader(`{"event":"job.completed","job_id":"job_1"}`))
			return r
		}, 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			w := e.do(t, tt.req())
			if w.Code != tt.want {
				t.Fatalf("status = %d, want %d", w.Code, tt.want)
			}
			if tt.want == 405 && w.Header().Get("Allow") != "POST" {
				t.Errorf("Allow = %q, want POST", w.Header().Get("Allow"))
			}
			if got := w.Header().Get("WWW-Authenticate"); tt.want == 401 && got != challenge {
				t.Errorf("WWW-Authenticate = %q, want %q, the same for every cause", got, challenge)
			}
			if w.Body.Len() != 0 {
				t.Errorf("body = %q, want none (no oracle)", w.Body)
			}
			if rows := e.rows(t); len(rows) != 0 {
				t.Errorf("wrote %d rows, want none", len(rows))
			}
		})
	}
}

// countingReader records whether anything read it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// TestTooLarge covers contract rows 2 and 3.
func TestTooLarge(t *testing.T) {
	t.Parallel()
	big := `{"event":"job.completed","job_id":"job_big","pad":"` + strings.Repeat("x", testHardCap) + `"}`

	t.Run("2 declared length above the cap is refused unread", func(t *testing.T) {
		e := newEnv(t, nil)
		body := &countingReader{r: strings.NewReader(big)}
		r := signedRequest(big, testNow, testSecret)
		r.Body = io.NopCloser(body)
		r.ContentLength = int64(len(big))
		w := e.do(t, r)
		if w.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("status = %d, want 413", w.Code)
		}
		if body.n != 0 {
			t.Errorf("read %d bytes of the body, want 0", body.n)
		}
		if rows := e.rows(t); len(rows) != 0 {
			t.Errorf("wrote %d rows, want none", len(rows))
		}
	})
	t.Run("3 undeclared body growing past the cap", func(t *testing.T) {
		e := newEnv(t, nil)
		r := signedRequest(big, testNow, testSecret)
		r.ContentLength = -1
		w := e.do(t, r)
		if w.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("status = %d, want 413", w.Code)
		}
		if rows := e.rows(t); len(rows) != 0 {
			t.Errorf("wrote %d rows, want none", len(rows))
		}
	})
	t.Run("body exactly at the cap is read", func(t *testing.T) {
		e := newEnv(t, nil)
		exact := big[:testHardCap-2] + `"}`
		w := e.post(t, exact)
		if w.Code != http.StatusNoContent {
			t.Fatalf("status = %d, want 204", w.Code)
		}
	})
}

// TestStored covers contract rows 8-18: each verified delivery gets a row,
// and the answer is 204.
func TestStored(t *testing.T) {
	t.Parallel()
	tooBig := `{"event":"job.completed","job_id":"job_big","status":"COMPLETED","pad":"` + strings.Repeat("x", testMaxBody) + `"}`
	tests := []struct {
		name   string
		body   string
		id     string
		status inbox.Status
		reason inbox.Reason
		check  func(t *testing.T, ev inbox.Event)
	}{
		{name: "9 not JSON", body: `not json`, id: bodyKey(`not json`), status: inbox.StatusParked, reason: inbox.ReasonUnparseable},
		{name: "9 empty", body: ``, id: bodyKey(``), status: inbox.StatusParked, reason: inbox.ReasonUnparseable},
		{name: "9 array", body: `[{"job_id":"job_1"}]`, id: bodyKey(`[{"job_id":"job_1"}]`), status: inbox.StatusParked, reason: inbox.ReasonUnparseable},
		{name: "9 null", body: `null`, id: bodyKey(`null`), status: inbox.StatusParked, reason: inbox.ReasonUnparseable},
		{name: "9 truncated object", body: `{"job_id":"job_1"`, id: bodyKey(`{"job_id":"job_1"`), status: inbox.StatusParked, reason: inbox.ReasonUnparseable},
		{name: "10 no job_id", body: `{"event":"job.completed"}`, id: bodyKey(`{"event":"job.completed"}`), status: inbox.StatusParked, reason: inbox.ReasonMissingJobID},
		{name: "10 empty job_id", body: `{"event":"job.completed","job_id":""}`, id: bodyKey(`{"event":"job.completed","job_id":""}`), status: inbox.StatusParked, reason: inbox.ReasonMissingJobID},
		{name: "10 job_id in the body-key namespace", body: `{"event":"job.completed","job_id":"sha256:00"}`, id: bodyKey(`{"event":"job.completed","job_id":"sha256:00"}`), status: inbox.StatusParked, reason: inbox.ReasonMissingJobID},
		{name: "10 numeric job_id", body: `{"event":"job.completed","job_id":7}`, id: bodyKey(`{"event":"job.completed","job_id":7}`), status: inbox.StatusParked, reason: inbox.ReasonMissingJobID},
		{name: "11 unknown event", body: `{"event":"job.exploded","job_id":"job_1"}`, id: "job_1", status: inbox.StatusParked, reason: inbox.ReasonUnknownEvent,
			check: func(t *testing.T, ev inbox.Event) {
				if ev.Event != "job.exploded" {
					t.Errorf("event = %q, want job.exploded", ev.Event)
				}
			}},
		{name: "12 payload too large", body: `{"event":"job.completed","job_id":"job_1","status":"COMPLETED","payload":null,"error":{"code":"payload_too_large","result_url":"https://api.example/v1/jobs/job_1/result"}}`,
			id: "job_1", status: inbox.StatusParked, reason: inbox.ReasonPayloadTooLarge,
			check: func(t *testing.T, ev inbox.Event) {
				if ev.ResultURL != "https://api.example/v1/jobs/job_1/result" {
					t.Errorf("result_url = %q", ev.ResultURL)
				}
			}},
		{name: "13 above the body limit", body: tooBig, id: "job_big", status: inbox.StatusParked, reason: inbox.ReasonTooLarge},
		{name: "14 test ping", body: `{"event":"webhook.test","request_id":"req_1"}`, id: bodyKey(`{"event":"webhook.test","request_id":"req_1"}`), status: inbox.StatusIgnored},
		{name: "18 completed", body: completed, id: "job_1", status: inbox.StatusNew,
			check: func(t *testing.T, ev inbox.Event) {
				if ev.Event != "job.completed" || ev.JobStatus != "COMPLETED" || ev.JobID != "job_1" {
					t.Errorf("row = %+v", ev)
				}
			}},
		{name: "18 failed", body: `{"event":"job.failed","job_id":"job_2","status":"ERROR","error":{"code":"render_failed"}}`, id: "job_2", status: inbox.StatusNew,
			check: func(t *testing.T, ev inbox.Event) {
				if ev.JobStatus != "ERROR" {
					t.Errorf("job_status = %q, want ERROR", ev.JobStatus)
				}
			}},
		{name: "18 canceled", body: `{"event":"job.canceled","job_id":"job_3","status":"ERROR"}`, id: "job_3", status: inbox.StatusNew},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			for attempt := 1; attempt <= 2; attempt++ {
				// The provider re-signs each retry with a fresh timestamp.
				w := e.do(t, signedRequest(tt.body, testNow.Add(time.Duration(attempt)*time.Second), testSecret))
				if w.Code != http.StatusNoContent {
					t.Fatalf("attempt %d: status = %d, want 204", attempt, w.Code)
				}
			}
			rows := e.rows(t)
			if len(rows) != 1 {
				t.Fatalf("got %d rows, want 1: %+v", len(rows), rows)
			}
			ev := e.get(t, tt.id)
			if ev.Status != tt.status || ev.Reason != tt.reason {
				t.Errorf("status, reason = %s, %q; want %s, %q", ev.Status, ev.Reason, tt.status, tt.reason)
			}
			if string(ev.Body) != tt.body || ev.Size != int64(len(tt.body)) {
				t.Errorf("body not kept exactly: got %d bytes, want %d", len(ev.Body), len(tt.body))
			}
			if ev.Deliveries != 2 {
				t.Errorf("deliveries = %d, want 2 (the retry lands on the same row)", ev.Deliveries)
			}
			if ev.DeliveryTS != testNow.Add(time.Second).Unix() {
				t.Errorf("delivery_ts = %d, want the first delivery's %d", ev.DeliveryTS, testNow.Add(time.Second).Unix())
			}
			if tt.check != nil {
				tt.check(t, ev)
			}
		})
	}
}

// TestRotation covers contract row 8 through the handler.
func TestRotation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for i, secrets := range [][]string{{"retired", testSecret}, {otherSecret, "retired"}} {
		body := strings.Replace(completed, "job_1", "job_r"+strconv.Itoa(i), 1)
		if w := e.do(t, signedRequest(body, testNow, secrets...)); w.Code != http.StatusNoContent {
			t.Fatalf("secrets %v: status = %d, want 204", secrets, w.Code)
		}
	}
	if n := len(e.rows(t)); n != 2 {
		t.Fatalf("got %d rows, want 2", n)
	}
}

// TestRepeats covers contract rows 15-17.
func TestRepeats(t *testing.T) {
	t.Parallel()
	t.Run("15 same job, same event: counted", func(t *testing.T) {
		e := newEnv(t, nil)
		e.post(t, completed)
		// A redelivery days later may carry different bytes for the same event.
		w := e.post(t, strings.Replace(completed, `"artifacts"`, `"artifacts_v2"`, 1))
		if w.Code != http.StatusNoContent {
			t.Fatalf("status = %d", w.Code)
		}
		rows := e.rows(t)
		if len(rows) != 1 || rows[0].Deliveries != 2 || rows[0].Status != inbox.StatusNew {
			t.Fatalf("rows = %+v, want one new row with 2 deliveries", rows)
		}
		if got := string(e.get(t, "job_1").Body); got != completed {
			t.Errorf("stored body changed to %s", got)
		}
	})
	t.Run("16 same job, different event: parked conflict beside", func(t *testing.T) {
		e := newEnv(t, nil)
		e.post(t, completed)
		failed := `{"event":"job.failed","job_id":"job_1","status":"ERROR"}`
		for range 2 {
			if w := e.post(t, failed); w.Code != http.StatusNoContent {
				t.Fatalf("status = %d", w.Code)
			}
		}
		if ev := e.get(t, "job_1"); ev.Status != inbox.StatusNew || ev.Event != "job.completed" {
			t.Errorf("original row = %s %s, want new job.completed", ev.Status, ev.Event)
		}
		c := e.get(t, bodyKey(failed))
		if c.Status != inbox.StatusParked || c.Reason != inbox.ReasonConflict || c.JobID != "job_1" || c.Deliveries != 2 {
			t.Errorf("conflict row = %+v", c)
		}
		if n := len(e.rows(t)); n != 2 {
			t.Errorf("got %d rows, want 2", n)
		}
	})
	t.Run("16 same job, different status: parked conflict beside", func(t *testing.T) {
		e := newEnv(t, nil)
		e.post(t, completed)
		other := strings.Replace(completed, `"COMPLETED"`, `"ERROR"`, 1)
		e.post(t, other)
		if c := e.get(t, bodyKey(other)); c.Reason != inbox.ReasonConflict {
			t.Errorf("reason = %q, want conflict", c.Reason)
		}
	})
	t.Run("16 poison for a stored job keeps its own reason beside it", func(t *testing.T) {
		e := newEnv(t, nil)
		e.post(t, completed)
		odd := `{"event":"job.exploded","job_id":"job_1"}`
		e.post(t, odd)
		if c := e.get(t, bodyKey(odd)); c.Reason != inbox.ReasonUnknownEvent || c.JobID != "job_1" {
			t.Errorf("row = %+v, want unknown_event for job_1", c)
		}
	})
	t.Run("17 parked job becomes new", func(t *testing.T) {
		e := newEnv(t, nil)
		e.post(t, `{"event":"job.completed","job_id":"job_1","payload":null,"error":{"code":"payload_too_large","result_url":"u"}}`)
		if ev := e.get(t, "job_1"); ev.Status != inbox.StatusParked {
			t.Fatalf("status = %s, want parked", ev.Status)
		}
		if w := e.post(t, completed); w.Code != http.StatusNoContent {
			t.Fatalf("status = %d", w.Code)
		}
		ev := e.get(t, "job_1")
		if ev.Status != inbox.StatusNew || ev.Reason != "" || string(ev.Body) != completed || ev.Deliveries != 2 || ev.ResultURL != "" {
			t.Errorf("row = %+v, want new with the storable body", ev)
		}
		if n := len(e.rows(t)); n != 1 {
			t.Errorf("got %d rows, want 1", n)
		}
	})
}

// failingStore forces the store error path.
type failingStore struct{ err error }

func (f failingStore) Put(context.Context, inbox.Delivery) (inbox.Result, error) {
	return inbox.Result{}, f.err
}

// TestStoreDown covers contract row 19: the answer is 503 with Retry-After,
// never a 2xx.
func TestStoreDown(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, e env) {
		t.Helper()
		w := e.post(t, completed)
		if w.Code != http.StatusServiceUnavailable {
			t.Fatalf("status = %d, want 503", w.Code)
		}
		if w.Header().Get("Retry-After") == "" {
			t.Error("no Retry-After")
		}
	}
	t.Run("closed store", func(t *testing.T) {
		store := sqlitetest.MustOpen(t, sqlite.Options{})
		e := newEnv(t, store)
		store.Close()
		check(t, e)
	})
	t.Run("locked past busy_timeout", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "inbox.db")
		store := sqlitetest.MustOpenPath(t, path, sqlite.Options{BusyTimeout: 500 * time.Millisecond})
		e := newEnv(t, store)
		holder, err := sql.Open("sqlite", path+"?_txlock=immediate")
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Close()
		tx, err := holder.Begin()
		if err != nil {
			t.Fatal(err)
		}
		check(t, e)
		tx.Rollback()
		if w := e.post(t, completed); w.Code != http.StatusNoContent {
			t.Fatalf("after the lock is released: status = %d, want 204", w.Code)
		}
	})
	t.Run("any store error", func(t *testing.T) {
		e := newEnv(t, nil)
		e.h.store = failingStore{err: errors.New("disk I/O error")}
		check(t, e)
	})
}

// TestNoSecretsInLogs sends failing and passing deliveries and checks that
// the log never holds a secret, a signature or a body.
func TestNoSecretsInLogs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	body := `{"event":"job.completed","job_id":"job_log","status":"COMPLETED","secret_payload":"tell-no-one"}`
	reqs := []*http.Request{
		signedRequest(body, testNow, testSecret),
		signedRequest(body, testNow, "wrong"),
		signedRequest(body, testNow.Add(-time.Hour), testSecret),
		signedRequest("tell-no-one", testNow, testSecret),
	}
	for _, r := range reqs {
		e.do(t, r)
	}
	ts := strconv.FormatInt(testNow.Unix(), 10)
	logs := e.logs.String()
	for _, bad := range []string{testSecret, otherSecret, "tell-no-one",
		hex.EncodeToString(sume.Sign(testSecret, ts, []byte(body))),
		hex.EncodeToString(sume.Sign("wrong", ts, []byte(body))),
	} {
		if strings.Contains(logs, bad) {
			t.Errorf("log holds %q:\n%s", bad, logs)
		}
	}
	if !strings.Contains(logs, sume.ErrMismatch.Error()) || !strings.Contains(logs, sume.ErrStaleTimestamp.Error()) {
		t.Errorf("log does not name the causes:\n%s", logs)
	}
}

// TestNewHandlerRefusesEmptySecret covers contract row 21.
func TestNewHandlerRefusesEmptySecret(t *testing.T) {
	t.Parallel()
	store := sqlitetest.MustOpen(t, sqlite.Options{})
	for _, secrets := range [][]string{nil, {""}, {"ok", ""}} {
		_, err := NewHandler(store, Config{Keys: keys(secrets...), Scheme: scheme.Sume{Tolerance: time.Minute}, HardCap: 1}, zerolog.Nop())
		if err == nil {
			t.Errorf("secrets %q: no error", secrets)
		}
	}
}

// TestReadBodyAllocatesWhatArrives declares far more than it sends: the
// buffer must follow the bytes, not the declared length, and the budget
// holds just that buffer until it is released.
func TestReadBodyAllocatesWhatArrives(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest(http.MethodPost, "/webhooks/sume", strings.NewReader("x"))
	r.ContentLength = 4 << 20
	budget := NewBudget(DefaultBodyMemory)
	held := reservation{budget: budget}
	b, err := readBody(httptest.NewRecorder(), r, 8<<20, time.Second, &held)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "x" || cap(b) > firstRead {
		t.Fatalf("read %q into a buffer of %d bytes, want at most %d", b, cap(b), firstRead)
	}
	if got := budget.Used(); got != int64(cap(b)) {
		t.Errorf("budget used %d, want the buffer's %d", got, cap(b))
	}
	held.release()
	if got := budget.Used(); got != 0 {
		t.Errorf("budget used %d after release, want 0", got)
	}
}

// keys returns the secrets as a scheme takes Sume's.
func keys(secrets ...string) []scheme.Secret {
	out := make([]scheme.Secret, len(secrets))
	for i, s := range secrets {
		out[i] = scheme.Secret{Key: []byte(s)}
	}
	return out
}
