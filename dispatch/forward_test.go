package dispatch_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"inbox/dispatch"
	"inbox/inbox"
)

// TestForwardSigned checks a signed delivery as an application would: it
// recomputes the MAC over webhook-id.webhook-timestamp.body with the key
// the whsec_ secret names.
func TestForwardSigned(t *testing.T) {
	keyBytes := []byte("0123456789abcdef0123456789abcdef")
	secret := "whsec_" + base64.StdEncoding.EncodeToString(keyBytes)
	now := time.Unix(1_800_000_000, 0)
	var got http.Header
	var gotBody string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Error(err)
		}
		gotBody = string(b)
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	f, err := dispatch.NewForward(srv.URL+"/hooks", secret, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	job := inbox.Job{ID: "job_1", Event: "job.failed", Body: []byte(body("job_1")), Attempt: 3}
	if err := f.Deliver(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, keyBytes)
	mac.Write([]byte("job_1." + strconv.FormatInt(now.Unix(), 10) + "." + body("job_1")))
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for h, v := range map[string]string{
		"webhook-id": "job_1", "webhook-timestamp": "1800000000", "webhook-signature": want,
		"Idempotency-Key": "job_1", "Inbox-Event": "job.failed", "Inbox-Attempt": "3",
		"Content-Type": "application/json",
	} {
		if got.Get(h) != v {
			t.Errorf("%s = %q, want %q", h, got.Get(h), v)
		}
	}
	if gotBody != body("job_1") {
		t.Errorf("body = %q", gotBody)
	}
}

// TestForwardStatuses checks which answers are success, which are retried
// and which park the row at once; no error text carries the body.
func TestForwardStatuses(t *testing.T) {
	for _, tt := range []struct {
		status       int
		ok, rejected bool
	}{
		{200, true, false}, {204, true, false}, {202, true, false},
		{408, false, false}, {429, false, false}, {500, false, false}, {503, false, false},
		{302, false, false}, {400, false, true}, {404, false, true}, {409, false, true}, {422, false, true},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", "/elsewhere")
			w.WriteHeader(tt.status)
		}))
		f, err := dispatch.NewForward(srv.URL, "s", nil)
		if err != nil {
			t.Fatal(err)
		}
		err = f.Deliver(context.Background(), inbox.Job{ID: "job_1", Event: "job.completed", Body: []byte(`{"secret":"payload"}`), Attempt: 1})
		srv.Close()
		if (err == nil) != tt.ok || dispatch.Rejected(err) != tt.rejected {
			t.Errorf("%d: err %v (rejected %v), want ok %v rejected %v", tt.status, err, dispatch.Rejected(err), tt.ok, tt.rejected)
		}
		if err != nil && (strings.Contains(err.Error(), "payload") || !strings.Contains(err.Error(), strconv.Itoa(tt.status))) {
			t.Errorf("%d: error %q", tt.status, err)
		}
	}
	// Nothing listens: retried, and the error holds no password.
	f, err := dispatch.NewForward("http://user:hunter2@127.0.0.1:1/", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	err = f.Deliver(context.Background(), inbox.Job{ID: "job_1", Body: []byte(`{}`), Attempt: 1})
	if err == nil || dispatch.Rejected(err) || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("connection refused: %v", err)
	}
}

func TestNewForwardRefuses(t *testing.T) {
	for _, u := range []string{"", "localhost:8080", "ftp://x/", "http://", "/relative"} {
		if _, err := dispatch.NewForward(u, "", nil); err == nil {
			t.Errorf("NewForward(%q) accepted", u)
		}
	}
	if _, err := dispatch.NewForward("http://user:hunter2@[::1", "", nil); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("bad URL error %v", err)
	}
	// What was typed is shown, less a password, with what is missing.
	for typed, shown := range map[string]string{
		"127.0.0.1:3000/jobs":              `"127.0.0.1:3000/jobs"`,
		"user:hunter2@127.0.0.1:3000/jobs": `"user:xxxxx@127.0.0.1:3000/jobs"`,
	} {
		_, err := dispatch.NewForward(typed, "", nil)
		if err == nil || !strings.Contains(err.Error(), shown) || !strings.Contains(err.Error(), "http:// or https://") || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("NewForward(%q): %v, want %s and the schemes", typed, err, shown)
		}
	}
}
