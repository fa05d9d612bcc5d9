package dispatch_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"inbox/dispatch"
	"inbox/inbox"
	"inbox/scheme"
	"inbox/sqlite"
)

// putKeyed stores rows of other sources than Sume on the clock's store: a Vibe
// run and a GitHub delivery, keyed by (source, key) as the receiver keys
// them.
func putKeyed(t *testing.T, s *sqlite.Store) {
	t.Helper()
	for _, d := range []inbox.Delivery{
		keyed("vibe", "run_1", "scheduled_job.run", []byte(`{"runId":"run_1"}`), 1_800_000_000, inbox.Rules{}),
		keyed("gh", "72d3162e-cc78-11e3-81ab-4c9367dc0958", "push", []byte(`{"ref":"main"}`), 1_800_000_000, inbox.Rules{}),
	} {
		if _, err := s.Put(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
}

// wantKeys is what each destination must say about each row: its source,
// the provider's own key and the row id.
var wantKeys = map[string][2]string{ // row id: source, key
	"job_1":      {"sume", "job_1"},
	"vibe/run_1": {"vibe", "run_1"},
	"gh/72d3162e-cc78-11e3-81ab-4c9367dc0958": {"gh", "72d3162e-cc78-11e3-81ab-4c9367dc0958"},
}

// TestForwardKeys dispatches a Sume, a Vibe and a GitHub row over HTTP,
// signed: Idempotency-Key and webhook-id are the provider's own key (the
// runId for Vibe, as its contract asks for external effects), beside the
// source and the row id, and the signature is over that webhook-id.
func TestForwardKeys(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := storeWith(t, c, "job_1")
	putKeyed(t, s)
	a := newApp(t, http.StatusNoContent)
	key := []byte("0123456789abcdef0123456789abcdef")
	f, err := dispatch.NewForward(a.URL, "whsec_"+base64.StdEncoding.EncodeToString(key), c.Now)
	if err != nil {
		t.Fatal(err)
	}
	start(t, s, dispatch.Config{Destination: f, Now: c.Now})
	waitFor(t, "three deliveries", func() bool { return a.hits.Load() == 3 })
	reqs, bodies := a.requests()
	seen := map[string]bool{}
	for i, r := range reqs {
		id := r.Header.Get(dispatch.HeaderRowID)
		want, ok := wantKeys[id]
		if !ok {
			t.Errorf("request %d: row id %q", i, id)
			continue
		}
		seen[id] = true
		for h, v := range map[string]string{
			dispatch.HeaderSource: want[0], dispatch.HeaderKey: want[1], dispatch.HeaderIdempotencyKey: want[1],
			scheme.HeaderWebhookID: want[1], dispatch.HeaderAttempt: "1",
		} {
			if got := r.Header.Get(h); got != v {
				t.Errorf("%s: %s = %q, want %q", id, h, got, v)
			}
		}
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(want[1] + "." + r.Header.Get(scheme.HeaderWebhookTimestamp) + "." + bodies[i]))
		if got := r.Header.Get(scheme.HeaderWebhookSignature); got != "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)) {
			t.Errorf("%s: signature %q does not verify with webhook-id %q", id, got, want[1])
		}
	}
	if len(seen) != 3 {
		t.Errorf("rows delivered: %v", seen)
	}
}

// TestExecKeys dispatches the same rows to a command: its environment names
// the source, the key and the row id (and INBOX_JOB_ID, as before).
func TestExecKeys(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	e, err := dispatch.NewExec(script(t, `env > "`+out+`/$INBOX_SOURCE.env"`), dispatch.Withheld{})
	if err != nil {
		t.Fatal(err)
	}
	c := newClock()
	s := storeWith(t, c, "job_1")
	putKeyed(t, s)
	start(t, s, dispatch.Config{Destination: e, Now: c.Now})
	for id, want := range wantKeys {
		waitFor(t, id+" done", func() bool { return row(t, s, id).Status == inbox.StatusDone })
		b, err := os.ReadFile(filepath.Join(out, want[0]+".env"))
		if err != nil {
			t.Fatal(err)
		}
		env := strings.Split(string(b), "\n")
		for _, kv := range []string{
			dispatch.EnvSource + "=" + want[0], dispatch.EnvKey + "=" + want[1],
			dispatch.EnvRowID + "=" + id, dispatch.EnvJobID + "=" + id, dispatch.EnvAttempt + "=" + strconv.Itoa(1),
		} {
			if !slices.Contains(env, kv) {
				t.Errorf("%s: the command's environment lacks %s", id, kv)
			}
		}
	}
}
