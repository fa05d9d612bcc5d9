package health_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"inbox/health"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

func probe(t *testing.T, h http.Handler) (int, string, http.Header) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	return w.Code, w.Body.String(), w.Header()
}

// TestReady checks readiness on a real store: ready while it takes writes,
// not while another process holds the write lock or once it is closed, and
// live throughout.
func TestReady(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inbox.db")
	store := sqlitetest.MustOpenPath(t, path, sqlite.Options{BusyTimeout: 500 * time.Millisecond})
	var logs bytes.Buffer
	ready := health.Ready(store, nil, time.Second, zerolog.New(&logs))
	live := health.Live()

	if code, body, _ := probe(t, ready); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("ready: %d %q, want 200 ok", code, body)
	}

	release := sqlitetest.HoldWriteLock(t, path)
	code, body, header := probe(t, ready)
	if code != http.StatusServiceUnavailable || header.Get("Retry-After") == "" || strings.Contains(body, "lock") {
		t.Errorf("write lock held: %d %q Retry-After %q; want 503 with Retry-After and no detail", code, body, header.Get("Retry-After"))
	}
	if !strings.Contains(logs.String(), "not ready") {
		t.Errorf("the cause is not logged: %q", logs.String())
	}
	if code, _, _ := probe(t, live); code != http.StatusOK {
		t.Errorf("live while the store is locked: %d, want 200", code)
	}
	release()
	if code, _, _ := probe(t, ready); code != http.StatusOK {
		t.Errorf("ready after the lock was released: %d, want 200", code)
	}

	store.Close()
	if code, _, _ := probe(t, ready); code != http.StatusServiceUnavailable {
		t.Errorf("ready on a closed store: %d, want 503", code)
	}
	if code, body, _ := probe(t, live); code != http.StatusOK || body != "ok\n" {
		t.Errorf("live: %d %q, want 200 ok", code, body)
	}
}

// TestReadyDependencies checks that a dependency's state is shown on
// /readyz, and fails it only when the dependency gates readiness.
func TestReadyDependencies(t *testing.T) {
	store := sqlitetest.MustOpen(t, sqlite.Options{})
	up := false
	state := func(context.Context) (bool, string) {
		if up {
			return true, "connected"
		}
		return false, "unreachable"
	}
	reported := health.Ready(store, nil, time.Second, zerolog.Nop(), health.Dependency{Name: "nats", State: state})
	gated := health.Ready(store, nil, time.Second, zerolog.Nop(), health.Dependency{Name: "nats", State: state, Gates: true})
	for _, tt := range []struct {
		h    http.Handler
		up   bool
		code int
		body string
	}{
		{reported, false, http.StatusOK, "ok\nnats: unreachable\n"},
		{gated, false, http.StatusServiceUnavailable, "not ready\nnats: unreachable\n"},
		{reported, true, http.StatusOK, "ok\nnats: connected\n"},
		{gated, true, http.StatusOK, "ok\nnats: connected\n"},
	} {
		up = tt.up
		if code, body, _ := probe(t, tt.h); code != tt.code || body != tt.body {
			t.Errorf("up %v: %d %q, want %d %q", tt.up, code, body, tt.code, tt.body)
		}
	}
}
