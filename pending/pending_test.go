package pending_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"inbox/inbox"
	"inbox/pending"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

var errDown = errors.New("connection refused")

// opener fails as an outage while down is set, then opens a real SQLite
// store; calls counts its attempts.
type opener struct {
	t *testing.T

	mu    sync.Mutex
	down  bool
	fatal error
	calls int
}

func (o *opener) open(ctx context.Context) (inbox.Store, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls++
	switch {
	case o.fatal != nil:
		return nil, o.fatal
	case o.down:
		return nil, errDown
	}
	return sqlitetest.MustOpen(o.t, sqlite.Options{}), nil
}

func (o *opener) set(down bool) {
	o.mu.Lock()
	o.down = down
	o.mu.Unlock()
}

// TestWaitsOutAnOutage: while the opener fails as an outage every
// operation fails at once with ErrNotOpen, the outage is told once, and
// the store opens by itself once the opener can (told once too).
func TestWaitsOutAnOutage(t *testing.T) {
	t.Parallel()
	o := &opener{t: t, down: true}
	var mu sync.Mutex
	var told []error
	s := pending.Open(context.Background(), pending.Options{Open: o.open, Transient: func(err error) bool { return errors.Is(err, errDown) },
		Wait: time.Second, OnDown: func(err error) { mu.Lock(); told = append(told, err); mu.Unlock() }})
	defer s.Close()
	d := inbox.Classify("", inbox.Named{}, []byte(`{"event":"job.completed","job_id":"j1","status":"COMPLETED"}`), 1, inbox.Rules{Events: []string{"job.completed"}})
	// The first attempt fails at once: known down, no operation waits.
	for range 3 {
		start := time.Now()
		if _, err := s.Put(context.Background(), d); !errors.Is(err, pending.ErrNotOpen) {
			t.Fatalf("Put while down: %v, want ErrNotOpen", err)
		}
		if took := time.Since(start); took > 100*time.Millisecond {
			t.Errorf("Put while known down took %s, want at once", took)
		}
		if err := s.Ping(context.Background()); !errors.Is(err, pending.ErrNotOpen) {
			t.Errorf("Ping while down: %v, want ErrNotOpen", err)
		}
		time.Sleep(pending.MinRetry)
	}
	o.set(false)
	deadline := time.Now().Add(5 * pending.MaxRetry)
	for s.Ping(context.Background()) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the store did not open once the opener could")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if res, err := s.Put(context.Background(), d); err != nil || res.Outcome != inbox.OutcomeStored {
		t.Errorf("Put once open: %+v, %v; want stored", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(told) != 2 || !errors.Is(told[0], errDown) || told[1] != nil {
		t.Errorf("OnDown told %v, want the outage once, then nil once", told)
	}
}

// TestFatal: an error that is no outage is told to OnFatal, ends the
// attempts, and leaves every operation failing.
func TestFatal(t *testing.T) {
	t.Parallel()
	bad := errors.New("password authentication failed")
	o := &opener{t: t, fatal: bad}
	fatal := make(chan error, 1)
	s := pending.Open(context.Background(), pending.Options{Open: o.open, Transient: func(err error) bool { return errors.Is(err, errDown) },
		Wait: time.Second, OnFatal: func(err error) { fatal <- err }})
	select {
	case err := <-fatal:
		if !errors.Is(err, bad) {
			t.Errorf("OnFatal told %v, want %v", err, bad)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("OnFatal not told")
	}
	if err := s.Ping(context.Background()); !errors.Is(err, pending.ErrNotOpen) {
		t.Errorf("Ping after a fatal error: %v, want ErrNotOpen", err)
	}
	if err := s.Err(); !errors.Is(err, bad) {
		t.Errorf("Err after a fatal error: %v, want %v", err, bad)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if o.calls != 1 {
		t.Errorf("Open was tried %d times after a fatal error, want once", o.calls)
	}
}

// TestWaitsForTheFirstAttempt: an operation during a first attempt that
// hangs waits for it up to Wait, then fails; Close ends the attempt.
func TestWaitsForTheFirstAttempt(t *testing.T) {
	t.Parallel()
	hang := func(ctx context.Context) (inbox.Store, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	const wait = 200 * time.Millisecond
	s := pending.Open(context.Background(), pending.Options{Open: hang, Transient: func(error) bool { return true }, Wait: wait})
	start := time.Now()
	if err := s.Ping(context.Background()); !errors.Is(err, pending.ErrNotOpen) {
		t.Errorf("Ping during a hung first attempt: %v, want ErrNotOpen", err)
	}
	if took := time.Since(start); took < wait || took > wait+500*time.Millisecond {
		t.Errorf("Ping returned after %s, want after about %s", took, wait)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the hung attempt")
	}
}
