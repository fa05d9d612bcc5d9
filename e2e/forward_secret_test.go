package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestForwardSecretVerifies makes a secret with inbox secret, runs serve
// forwarding with it, and has the application verify each forward the way
// the reference Standard Webhooks library does with its defaults
// (NewWebhook strips whsec_ and base64-decodes the rest, whatever the
// secret looks like). A raw secret, which that library could only verify
// through its raw option, stops serve and dispatch at start with one line
// naming the variable.
func TestForwardSecretVerifies(t *testing.T) {
	t.Parallel()
	out, errOut, code := runCLI(t, nil, "secret")
	secret := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(secret, "whsec_") || errOut != "" {
		t.Fatalf("inbox secret: exit %d, %q %q", code, out, errOut)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	verified := map[string]bool{}
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id, ts := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp")
		mac := hmac.New(sha256.New, key)
		fmt.Fprintf(mac, "%s.%s.%s", id, ts, body)
		want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
		for _, sig := range strings.Split(r.Header.Get("webhook-signature"), " ") {
			if v, s, _ := strings.Cut(sig, ","); v == "v1" && hmac.Equal([]byte(s), []byte(want)) {
				mu.Lock()
				verified[id] = true
				mu.Unlock()
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer app.Close()

	db := filepath.Join(t.TempDir(), "inbox.db")
	srv := startServer(t, db, "--forward-url", app.URL, "--forward-secret", secret)
	if got := send(t, http.DefaultClient, srv.url, `{"event":"job.completed","job_id":"job_1","status":"COMPLETED"}`, e2eSecret); got != http.StatusNoContent {
		t.Fatalf("delivery: %d", got)
	}
	waitLong(t, 10*time.Second, "the forward verified", func() bool { mu.Lock(); defer mu.Unlock(); return verified["job_1"] })
	if strings.Contains(srv.logs.String(), strings.TrimPrefix(secret, "whsec_")) {
		t.Error("the log holds the forward secret")
	}

	for _, args := range [][]string{
		{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "inbox.db"), "--secret", e2eSecret, "--forward-url", app.URL},
		{"dispatch", "--db", db, "--forward-url", app.URL},
	} {
		_, errOut, code := runCLI(t, []string{"INBOX_FORWARD_SECRET=my-raw-forward-key"}, args...)
		if code != 1 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, "INBOX_FORWARD_SECRET") ||
			!strings.Contains(errOut, "whsec_") || strings.Contains(errOut, "my-raw-forward-key") {
			t.Errorf("%s with a raw forward secret: exit %d, stderr %q; want one line naming the variable and the form", args[0], code, errOut)
		}
	}
}
