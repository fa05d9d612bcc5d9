package process

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"inbox/config"
	"inbox/inbox"
	"inbox/receiver"
	"inbox/scheme"
	"inbox/sqlite"
	"inbox/sume"
)

// TestReloadKeepsRetiredSecretUses checks that a secret a reload retires
// keeps its last use until a save after the grace, and that a refused
// file leaves the live set as it was.
func TestReloadKeepsRetiredSecretUses(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store, err := openTestStore(ctx, filepath.Join(dir, "inbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	file := filepath.Join(dir, "inbox.toml")
	write := func(secret string) {
		text := "[[source]]\nname = \"sume\"\nscheme = \"sume\"\n[[source.secret]]\nvalue = \"" + secret + "\"\n"
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	live := &liveSources{check: func([]config.Source) error { return nil }, read: ReadSources, grace: time.Hour, log: zerolog.Nop()}
	live.build = func(sources []config.Source) (*sourceSet, error) {
		set := &sourceSet{sources: sources, mux: http.NewServeMux()}
		for _, src := range sources {
			h, err := receiver.NewHandler(store, receiver.Config{Source: src.Name, Scheme: src.Scheme, Keys: src.Keys, Rules: src.Rules, HardCap: src.HardCap}, zerolog.Nop())
			if err != nil {
				return nil, err
			}
			set.handlers = append(set.handlers, h)
			set.mux.Handle(src.Path, h)
		}
		return set, nil
	}
	write("old-secret")
	sources, err := ReadSources(file)
	if err != nil {
		t.Fatal(err)
	}
	set, err := live.build(sources)
	if err != nil {
		t.Fatal(err)
	}
	live.cur.Store(set)
	deliver := func(secret string) int {
		body := `{"event":"job.completed","job_id":"job_1","status":"COMPLETED"}`
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		r := httptest.NewRequest(http.MethodPost, "/webhooks/sume", strings.NewReader(body))
		r.Header.Set(sume.HeaderTimestamp, ts)
		r.Header.Set(sume.HeaderSignature, sume.SignatureHeader(ts, []byte(body), secret))
		w := httptest.NewRecorder()
		live.ServeHTTP(w, r)
		return w.Code
	}
	if code := deliver("old-secret"); code != http.StatusNoContent {
		t.Fatalf("before the reload: %d, want 204", code)
	}
	write("new-secret")
	apply, err := live.reload(file)
	if err != nil {
		t.Fatal(err)
	}
	apply()
	if code := deliver("old-secret"); code != http.StatusUnauthorized {
		t.Errorf("the retired secret after the reload: %d, want 401", code)
	}
	old := scheme.Secret{Key: []byte("old-secret")}.Fingerprint()
	has := func() bool {
		uses, saved := live.secretUses()
		saved()
		for _, u := range uses {
			if u.Fingerprint == old {
				return true
			}
		}
		return false
	}
	if !has() {
		t.Fatal("the retired secret's use is gone after the reload")
	}
	if !has() {
		t.Error("the retired secret's use is gone after a save within the grace")
	}
	live.grace = 0
	has() // the save after the grace forgets the retired set
	if has() {
		t.Error("the retired set is kept after a save past the grace")
	}

	write("replace-with-the-signing-secret")
	if _, err := live.reload(file); err == nil || !strings.Contains(err.Error(), "placeholder") {
		t.Errorf("a placeholder secret: %v, want refused", err)
	}
	if code := deliver("new-secret"); code != http.StatusNoContent {
		t.Errorf("after a refused reload: %d, want 204", code)
	}
}

// TestReloadSlowStepCoalesces runs a reload whose step blocks: the
// SIGHUPs meanwhile are each logged and end in one more reload once it
// returns; a cancel while a reload blocks returns at once, and what that
// reload read is never applied.
func TestReloadSlowStepCoalesces(t *testing.T) {
	var said atomic.Int64 // the lines for SIGHUPs during a reload
	log := zerolog.New(io.Discard).Hook(zerolog.HookFunc(func(_ *zerolog.Event, _ zerolog.Level, msg string) {
		if strings.HasPrefix(msg, "SIGHUP while a reload is still running") {
			said.Add(1)
		}
	}))
	hup := make(chan os.Signal)
	release := make(chan struct{})
	started := make(chan struct{}, 10)
	var applied atomic.Int64
	step := func(string) (func(), error) {
		started <- struct{}{}
		<-release
		return func() { applied.Add(1) }, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		reloadOnHangup(ctx, hup, "c.toml", log, step)
	}()
	hup <- syscall.SIGHUP
	<-started
	for range 3 {
		hup <- syscall.SIGHUP
	}
	// Each SIGHUP during the reload is said.
	waitUntil(t, func() bool { return said.Load() == 3 })
	release <- struct{}{}
	<-started // the one reload the three SIGHUPs asked for
	waitUntil(t, func() bool { return applied.Load() == 1 })

	cancel()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("a cancel during a blocked reload did not return")
	}
	close(release)
	time.Sleep(50 * time.Millisecond)
	if got := applied.Load(); got != 1 {
		t.Fatalf("%d reloads applied, want 1: the one read after the cancel must not be", got)
	}
	select {
	case <-started:
		t.Fatal("a third reload ran: the SIGHUPs were not coalesced")
	default:
	}
}

// waitUntil waits up to 5s for cond.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}

// openTestStore opens a SQLite store at path with serve's schema.
func openTestStore(ctx context.Context, path string) (inbox.Store, error) {
	schema, err := os.ReadFile(filepath.Join("..", "schema.sql"))
	if err != nil {
		return nil, err
	}
	s, err := sqlite.Open(ctx, path, sqlite.Options{Schema: string(schema)})
	if err != nil {
		return nil, err
	}
	return s, nil
}
