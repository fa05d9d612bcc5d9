package process

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"inbox/inbox"
	"inbox/receiver"
	"inbox/scheme"
	"inbox/sume"
)

// countingStore counts the saves of failed verifications, the first of
// which fails as a store that is down does.
type countingStore struct {
	inbox.Store
	saves atomic.Int64
}

func (s *countingStore) RecordUnverified(ctx context.Context, runs []inbox.Unverified) error {
	if len(runs) == 0 {
		return nil
	}
	if s.saves.Add(1) == 1 {
		return errors.New("store down")
	}
	return s.Store.RecordUnverified(ctx, runs)
}

// TestRecordVerificationsFlood checks that a flood of forged requests
// costs one save a period, not one a request, and that the failures a
// failed save could not write are written by the next.
func TestRecordVerificationsFlood(t *testing.T) {
	ctx := context.Background()
	real, err := openTestStore(ctx, filepath.Join(t.TempDir(), "inbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	store := &countingStore{Store: real}
	h, err := receiver.NewHandler(store, receiver.Config{Scheme: scheme.Sume{Tolerance: time.Minute},
		Keys: []scheme.Secret{{Key: []byte("the-secret")}}, HardCap: 1 << 20}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	const forged = 300
	start := time.Now()
	for range forged {
		body := `{"event":"job.completed","job_id":"job_1","status":"COMPLETED"}`
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		r := httptest.NewRequest(http.MethodPost, "/webhooks/sume", strings.NewReader(body))
		r.Header.Set(sume.HeaderTimestamp, ts)
		r.Header.Set(sume.HeaderSignature, sume.SignatureHeader(ts, []byte(body), "a-rotated-secret"))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusUnauthorized {
			t.Fatalf("forged request: %d, want 401", w.Code)
		}
	}
	uses := func() ([]inbox.SecretUse, func()) { return h.SecretUses(), func() {} }
	unverified := func() []inbox.Unverified { return []inbox.Unverified{h.Unverified()} }
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- recordVerifications(rctx, store, uses, unverified, 10*time.Millisecond, time.Second) }()
	var runs []inbox.Unverified
	for deadline := time.Now().Add(10 * time.Second); len(runs) == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if runs, err = real.Unverified(ctx); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("the last save: %v", err)
	}
	if len(runs) != 1 || runs[0].Source != inbox.DefaultSource || runs[0].Count != forged || runs[0].First.Before(start.Truncate(time.Millisecond)) || runs[0].Last.Before(runs[0].First) {
		t.Fatalf("saved %+v, want one run of %d failures of %s", runs, forged, inbox.DefaultSource)
	}
	if n := store.saves.Load(); n != 2 {
		t.Errorf("%d forged requests made %d saves, want 2 (the failed one and its retry)", forged, n)
	}
}

// TestFailuresAfterAVerifiedDelivery: a request that fails verification,
// then a delivery that verifies, then another failure, all within one save
// period: the failure after the verified delivery is still counted once
// saved (the run before it is ended by it, not the one after).
func TestFailuresAfterAVerifiedDelivery(t *testing.T) {
	ctx := context.Background()
	store, err := openTestStore(ctx, filepath.Join(t.TempDir(), "inbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	clock := time.Now()
	h, err := receiver.NewHandler(store, receiver.Config{Scheme: scheme.Sume{Tolerance: time.Minute},
		Keys: []scheme.Secret{{Key: []byte("the-secret")}}, HardCap: 1 << 20, Now: func() time.Time { return clock }}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	send := func(secret string, want int) {
		t.Helper()
		body := `{"event":"job.completed","job_id":"job_1","status":"COMPLETED"}`
		ts := strconv.FormatInt(clock.Unix(), 10)
		r := httptest.NewRequest(http.MethodPost, "/webhooks/sume", strings.NewReader(body))
		r.Header.Set(sume.HeaderTimestamp, ts)
		r.Header.Set(sume.HeaderSignature, sume.SignatureHeader(ts, []byte(body), secret))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Fatalf("request signed with %s: %d, want %d", secret, w.Code, want)
		}
		clock = clock.Add(time.Second)
	}
	send("a-rotated-secret", http.StatusUnauthorized)
	send("the-secret", http.StatusNoContent)
	after := clock
	send("a-rotated-secret", http.StatusUnauthorized)
	if err := store.RecordSecretUses(ctx, h.SecretUses()); err != nil {
		t.Fatal(err)
	}
	if err := store.RecordUnverified(ctx, []inbox.Unverified{h.Unverified()}); err != nil {
		t.Fatal(err)
	}
	runs, err := store.Unverified(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Count != 1 || !runs[0].First.Equal(after.UTC().Truncate(time.Millisecond)) {
		t.Fatalf("saved runs = %+v, want the one failure after the verified delivery, at %s", runs, after)
	}
}
