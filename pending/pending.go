// Package pending is a store opened in the background: serve and dispatch
// start on it while their database cannot be reached, answer from the
// first moment (every operation fails, so deliveries get 503 and /readyz
// fails), and take the real store as soon as it opens, with nothing done
// by the operator.
package pending

import (
	"context"
	"errors"
	"sync"
	"time"

	"inbox/inbox"
)

// ErrNotOpen is what every operation fails with until the store opens: its
// database could not be reached yet.
var ErrNotOpen = errors.New("the store is not open yet: its database cannot be reached")

// Retry bounds: the first retry after an outage comes after MinRetry, each
// later one after twice the wait before, at most MaxRetry.
const (
	MinRetry = 250 * time.Millisecond
	MaxRetry = 2 * time.Second
)

// Options configure Open.
type Options struct {
	// Open opens the store; it is called until it succeeds, fails with an
	// error Transient refuses, or the Store is closed.
	Open func(ctx context.Context) (inbox.Store, error)
	// Transient reports whether an error of Open is an outage to wait out
	// (the database cannot be reached) rather than a configuration to fix.
	Transient func(error) bool
	// Wait bounds how long an operation waits for the first attempt to end
	// (the busy timeout): a database that is slow to answer is waited for
	// as a write would wait, one known to be down is not waited for at all.
	Wait time.Duration
	// OnDown, when set, is called with Open's error the first time it
	// fails as an outage, and with nil once the store opened after that.
	OnDown func(error)
	// OnFatal, when set, is called with Open's error when it fails other
	// than as an outage: the store then never opens.
	OnFatal func(error)
}

// Store is an inbox.Store whose operations go to the store Options.Open
// returned once it has, and fail with ErrNotOpen before (and for good
// after a fatal error, which OnFatal is told of).
type Store struct {
	opts    Options
	cancel  context.CancelFunc
	ended   chan struct{} // the opener returned
	settled chan struct{} // the first attempt ended

	mu    sync.Mutex
	store inbox.Store // nil until open
	fatal error

	closeOnce sync.Once
	closeErr  error
}

// Open starts opening the store in the background and returns at once.
// The attempts outlive ctx's cancellation (a store that opens while the
// process stops still takes what it writes last); they end with Close.
func Open(ctx context.Context, opts Options) *Store {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &Store{opts: opts, cancel: cancel, ended: make(chan struct{}), settled: make(chan struct{})}
	go s.run(ctx)
	return s
}

// run calls Open until it succeeds, fails for good, or ctx is done.
func (s *Store) run(ctx context.Context) {
	defer close(s.ended)
	var settle sync.Once
	down := false
	wait := MinRetry
	for {
		st, err := s.opts.Open(ctx)
		switch {
		case err == nil:
			s.mu.Lock()
			s.store = st
			s.mu.Unlock()
			settle.Do(func() { close(s.settled) })
			if down && s.opts.OnDown != nil {
				s.opts.OnDown(nil)
			}
			return
		case ctx.Err() != nil:
			return
		case !s.opts.Transient(err):
			s.mu.Lock()
			s.fatal = err
			s.mu.Unlock()
			settle.Do(func() { close(s.settled) })
			if s.opts.OnFatal != nil {
				s.opts.OnFatal(err)
			}
			return
		}
		if !down && s.opts.OnDown != nil {
			s.opts.OnDown(err)
		}
		down = true
		settle.Do(func() { close(s.settled) })
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return
		}
		wait = min(2*wait, MaxRetry)
	}
}

// Settled is closed once the first attempt to open has ended, whatever
// its outcome.
func (s *Store) Settled() <-chan struct{} { return s.settled }

// Err returns the error that stopped the attempts for good, nil while none
// did.
func (s *Store) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fatal
}

// get returns the open store, waiting at most Options.Wait (and while ctx
// lasts) for the first attempt to end; ErrNotOpen while it has not opened.
func (s *Store) get(ctx context.Context) (inbox.Store, error) {
	select {
	case <-s.settled:
	default:
		t := time.NewTimer(s.opts.Wait)
		defer t.Stop()
		select {
		case <-s.settled:
		case <-t.C:
		case <-ctx.Done():
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.store == nil {
		return nil, ErrNotOpen
	}
	return s.store, nil
}

// Close stops the attempts and closes the store if it opened.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		<-s.ended
		if s.store != nil {
			s.closeErr = s.store.Close()
		}
	})
	return s.closeErr
}

// Ping fails with ErrNotOpen until the store is open, then is its Ping.
func (s *Store) Ping(ctx context.Context) error {
	st, err := s.get(ctx)
	if err != nil {
		return err
	}
	return st.Ping(ctx)
}

// Probe fails with ErrNotOpen until the store is open, then is its Probe.
func (s *Store) Probe(ctx context.Context, size int) error {
	st, err := s.get(ctx)
	if err != nil {
		return err
	}
	return st.Probe(ctx, size)
}

// do runs f on the open store, or fails as get does.
func do[T any](ctx context.Context, s *Store, f func(inbox.Store) (T, error)) (T, error) {
	st, err := s.get(ctx)
	if err != nil {
		var zero T
		return zero, err
	}
	return f(st)
}

// do2 is do for the operations that return two values and an error.
func do2[T, U any](ctx context.Context, s *Store, f func(inbox.Store) (T, U, error)) (T, U, error) {
	st, err := s.get(ctx)
	if err != nil {
		var t T
		var u U
		return t, u, err
	}
	return f(st)
}
