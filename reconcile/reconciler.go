package reconcile

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"inbox/inbox"
	"inbox/sume"
)

// Store is what the Reconciler needs of the inbox.
type Store interface {
	RecordRefusals(ctx context.Context, refusals []inbox.Refusal) error
	ClaimPolls(ctx context.Context, owner string, now, until time.Time, max int) ([]inbox.Poll, error)
	SettlePolls(ctx context.Context, owner string, results []inbox.PollResult) (int, error)
}

// API is what the Reconciler asks of the provider; *sume.Client is one.
type API interface {
	JobStatus(ctx context.Context, jobID, statusURL string) (string, error)
	Redeliver(ctx context.Context, jobID string) error
}

// Defaults for Config fields left zero.
const (
	DefaultFlushEvery      = time.Second
	DefaultPollEvery       = 30 * time.Second
	DefaultBackoff         = time.Minute
	DefaultMaxBackoff      = time.Hour
	DefaultConcurrency     = 2
	DefaultRate            = 5
	DefaultLease           = 5 * time.Minute
	DefaultMaxRedeliveries = 5
	// DefaultWriteTimeout bounds each write of the refusals and the
	// settlements of the polls, the last ones once the reconciler is told
	// to stop included.
	DefaultWriteTimeout = 5 * time.Second
)

// Request kinds and results, for Config.OnRequest (and metrics).
const (
	RequestStatus    = "status"
	RequestRedeliver = "redeliver"

	ResultOK      = "ok"
	ResultUnknown = "unknown_job"
	ResultBusy    = "busy"
	ResultFailed  = "failed"
)

// Config configures a Reconciler.
type Config struct {
	// Refusals, when set, is written to the store every FlushEvery while it
	// holds keys, and once more when Run ends.
	Refusals   *Refusals
	FlushEvery time.Duration
	// WriteTimeout bounds each write to the store (DefaultWriteTimeout
	// when zero): how long a stop waits, at most, for the refusals held
	// in memory while the store hangs, after a write already under way.
	WriteTimeout time.Duration
	// API, when set, is polled for the expectations that are due; nil: no
	// polling (no API key is configured).
	API API
	// PollEvery is how often due expectations are looked for.
	PollEvery time.Duration
	// Backoff is the wait after a poll that found the job still running, or
	// after asking for a redelivery that has not arrived; it doubles with
	// each poll of the job, up to MaxBackoff.
	Backoff, MaxBackoff time.Duration
	// Concurrency bounds the requests to the API at once; Rate bounds them
	// per second, all together.
	Concurrency int
	Rate        float64
	// Lease is how long a claimed expectation is held by this poller: it
	// must outlast a poll's requests.
	Lease time.Duration
	// MaxRedeliveries is how many redeliveries of a job are asked for before
	// its expectation is closed.
	MaxRedeliveries int64
	// OnRequest, when set, is called after each request to the API with its
	// kind (RequestStatus, RequestRedeliver) and result (Result*).
	OnRequest func(request, result string)
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Reconciler writes remembered refusals to the store and polls the API for
// overdue expectations.
type Reconciler struct {
	store Store
	cfg   Config
	owner string
	log   zerolog.Logger

	mu         sync.Mutex
	pauseUntil time.Time // a Retry-After asked every request to wait
}

// New returns a Reconciler on store. It fails when a Config field is out of
// range.
func New(store Store, cfg Config, log zerolog.Logger) (*Reconciler, error) {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&cfg.FlushEvery, DefaultFlushEvery)
	def(&cfg.WriteTimeout, DefaultWriteTimeout)
	def(&cfg.PollEvery, DefaultPollEvery)
	def(&cfg.Backoff, DefaultBackoff)
	def(&cfg.MaxBackoff, DefaultMaxBackoff)
	def(&cfg.Lease, DefaultLease)
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.Rate == 0 {
		cfg.Rate = DefaultRate
	}
	if cfg.MaxRedeliveries == 0 {
		cfg.MaxRedeliveries = DefaultMaxRedeliveries
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	switch {
	case cfg.FlushEvery < 0 || cfg.PollEvery <= 0 || cfg.Backoff <= 0:
		return nil, fmt.Errorf("poll interval %s and backoff %s must be positive", cfg.PollEvery, cfg.Backoff)
	case cfg.MaxBackoff < cfg.Backoff:
		return nil, fmt.Errorf("the longest backoff %s is shorter than the first %s", cfg.MaxBackoff, cfg.Backoff)
	case cfg.Concurrency < 1 || cfg.Concurrency > 64:
		return nil, fmt.Errorf("API concurrency %d: want 1 to 64", cfg.Concurrency)
	case cfg.Rate <= 0 || cfg.Rate > 1000:
		return nil, fmt.Errorf("API rate %g: want above 0, at most 1000 requests a second", cfg.Rate)
	case cfg.Lease < 30*time.Second:
		return nil, fmt.Errorf("poll lease %s: want at least 30s, longer than a poll's requests", cfg.Lease)
	case cfg.MaxRedeliveries < 1:
		return nil, fmt.Errorf("max redeliveries %d: want at least 1", cfg.MaxRedeliveries)
	}
	return &Reconciler{store: store, cfg: cfg, owner: newOwner(), log: log.With().Str("loop", "reconcile").Logger()}, nil
}

// newOwner names this poller in the claims it holds: host, pid and a
// random part, so a restarted process never takes over a dead one's claim.
func newOwner() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	rand.Read(b)
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b))
}

// Run writes refusals and polls until ctx is done, then finishes the polls
// under way (their requests cut short), settles them and writes the
// refusals one last time, within 5 s. It returns an error only when
// refusals were left unwritten at the end, naming how many; each of those
// is logged (source, key and job) so none is lost without a trace.
func (r *Reconciler) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	if r.cfg.API != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.poll(ctx)
		}()
	}
	var err error
	if r.cfg.Refusals != nil {
		err = r.flush(ctx)
	}
	wg.Wait()
	return err
}

// flush writes the refusals every FlushEvery until ctx is done, then once
// more.
func (r *Reconciler) flush(ctx context.Context) error {
	tick := time.NewTicker(r.cfg.FlushEvery)
	defer tick.Stop()
	// When ctx ended: the last write ends WriteTimeout after it, even when
	// a write under way then (not cut short, see below) used up part of it,
	// so a stop while the store hangs waits no longer than one write.
	var stopped atomic.Int64
	defer context.AfterFunc(ctx, func() { stopped.Store(time.Now().UnixNano()) })()
	failing := false
	for {
		select {
		case <-tick.C:
			// Not ctx: a write that commits after a cancel must not be
			// given back to memory and written again (counted twice).
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.WriteTimeout)
			err := r.write(wctx)
			cancel()
			if err != nil && !failing {
				r.log.Warn().Err(err).Int("waiting", r.cfg.Refusals.Len()).Msg("cannot record refused deliveries yet; retrying")
			} else if err == nil && failing {
				r.log.Info().Msg("refused deliveries recorded: inbox missed lists them")
			}
			failing = err != nil
		case <-ctx.Done():
			by := time.Now().Add(r.cfg.WriteTimeout)
			if at := stopped.Load(); at != 0 {
				by = time.Unix(0, at).Add(r.cfg.WriteTimeout)
			}
			fctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), latest(by, time.Now().Add(minLastWrite)))
			defer cancel()
			if err := r.write(fctx); err != nil {
				return fmt.Errorf("%d refused keys were not recorded (the store refused them too; each is logged): %w", r.logLost(), err)
			}
			return nil
		}
	}
}

// minLastWrite is the least time the last write of the refusals gets,
// however long the write under way at the stop took.
const minLastWrite = 100 * time.Millisecond

// latest returns the later of a and b.
func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// logLost logs, a line each, the refusals the memory still holds, which
// end with the process: what an operator needs to ask for them again (the
// source, the key, the job), never a body. It returns how many.
func (r *Reconciler) logLost() int {
	held := r.cfg.Refusals.take()
	for _, f := range held {
		r.log.Error().Str("source", f.Source).Str("key", f.Key).Str("job", f.JobID).Time("first_refused_at", f.First).
			Int64("refusals", f.Count).Msg("refused delivery not recorded: ask for it again (inbox redeliver JOB_ID, for Sume)")
	}
	return len(held)
}

// write hands what the memory holds to the store, and gives it back when
// the store refuses it.
func (r *Reconciler) write(ctx context.Context) error {
	held := r.cfg.Refusals.take()
	if len(held) == 0 {
		return nil
	}
	if err := r.store.RecordRefusals(ctx, held); err != nil {
		r.cfg.Refusals.giveBack(held)
		return err
	}
	return nil
}

// maxClaim is how many expectations one claim takes per unit of
// concurrency.
const maxClaim = 4

// poll claims due expectations every PollEvery (and at once at start) and
// polls them, until ctx is done.
func (r *Reconciler) poll(ctx context.Context) {
	limiter := time.NewTicker(time.Duration(float64(time.Second) / r.cfg.Rate))
	defer limiter.Stop()
	tick := time.NewTicker(r.cfg.PollEvery)
	defer tick.Stop()
	failing := false
	for {
		err := r.round(ctx, limiter.C)
		if err != nil && !failing && ctx.Err() == nil {
			r.log.Warn().Err(err).Msg("cannot claim expectations yet; retrying")
		}
		failing = err != nil
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// round claims and polls due expectations until fewer than a full claim
// are due.
func (r *Reconciler) round(ctx context.Context, limiter <-chan time.Time) error {
	batch := r.cfg.Concurrency * maxClaim
	for ctx.Err() == nil {
		now := r.cfg.Now()
		until := now.Add(r.cfg.Lease)
		polls, err := r.store.ClaimPolls(ctx, r.owner, now, until, batch)
		if err != nil {
			return err
		}
		results := make([]inbox.PollResult, len(polls))
		work := make(chan int)
		var wg sync.WaitGroup
		for range min(r.cfg.Concurrency, len(polls)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range work {
					results[i] = r.pollOne(ctx, limiter, polls[i], until.Add(-r.cfg.Lease/leaseMargin))
				}
			}()
		}
		for i := range polls {
			work <- i
		}
		close(work)
		wg.Wait()
		// Settled even when ctx is done: a poll cut short is released, so
		// the next poller need not wait for the lease.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.WriteTimeout)
		stale, err := r.store.SettlePolls(sctx, r.owner, results)
		cancel()
		if err != nil {
			return err
		}
		if stale > 0 {
			r.log.Info().Int("stale", stale).Msg("expectations settled elsewhere meanwhile (delivered, or polled by another)")
		}
		if len(polls) < batch {
			return nil
		}
	}
	return nil
}

// leaseMargin: a poll's requests end a fifth of the lease before it runs
// out, so another replica never claims an expectation this one is still
// asking the provider about.
const leaseMargin = 5

// pollOne polls one expectation: reads the job's status and, when it has
// ended, asks for a redelivery. No request starts, and none runs, past
// deadline (before the claim's lease ends): the poll is released instead.
func (r *Reconciler) pollOne(ctx context.Context, limiter <-chan time.Time, p inbox.Poll, deadline time.Time) inbox.PollResult {
	res := inbox.PollResult{Poll: p}
	log := r.log.With().Str("job", p.JobID).Int64("poll", p.Attempt).Logger()
	again := func(err error, wait time.Duration) inbox.PollResult {
		res.Fate, res.At = inbox.PollAgain, r.cfg.Now()
		res.Next = res.At.Add(wait)
		if err != nil {
			res.Error = err.Error()
		}
		return res
	}
	closeWith := func(reason string) inbox.PollResult {
		res.Fate, res.At, res.Reason = inbox.PollClose, r.cfg.Now(), reason
		log.Warn().Str("reason", reason).Msg("expectation closed")
		return res
	}
	// leased bounds a request by what is left of the lease; ok is false when
	// too little is left to start one.
	leased := func() (context.Context, context.CancelFunc, bool) {
		left := deadline.Sub(r.cfg.Now())
		if left <= 0 {
			return nil, nil, false
		}
		rctx, cancel := context.WithTimeout(ctx, left)
		return rctx, cancel, true
	}
	if err := r.wait(ctx, limiter); err != nil {
		return again(nil, 0) // stopping: released for the next poller
	}
	rctx, cancel, ok := leased()
	if !ok {
		return again(nil, 0) // the lease is nearly over: released
	}
	status, err := r.cfg.API.JobStatus(rctx, p.JobID, p.StatusURL)
	cancel()
	r.count(RequestStatus, err)
	switch {
	case ctx.Err() != nil:
		return again(nil, 0)
	case errors.Is(err, sume.ErrUnknownJob):
		return closeWith(fmt.Sprintf("the provider does not know job %s (GET status: 404)", p.JobID))
	case errors.Is(err, sume.ErrForeignStatusURL):
		return closeWith(fmt.Sprintf("its status URL is not on the API's host, so the key is not sent there: expect %s again without --status-url", p.JobID))
	case err != nil:
		log.Warn().Err(err).Msg("job status failed; polling again later")
		return again(err, r.retryWait(err, p.Attempt))
	}
	res.JobStatus = status
	if !sume.Terminal(status) {
		log.Info().Str("job_status", status).Msg("job still running; polling again later")
		return again(nil, r.backoff(p.Attempt))
	}
	if p.Redeliveries >= r.cfg.MaxRedeliveries {
		return closeWith(fmt.Sprintf("the provider says %s, and %d redeliveries asked for brought no delivery: check the webhook URL and signing secret in its dashboard", status, p.Redeliveries))
	}
	if err := r.wait(ctx, limiter); err != nil {
		return again(nil, 0)
	}
	if rctx, cancel, ok = leased(); !ok {
		return again(nil, 0)
	}
	err = r.cfg.API.Redeliver(rctx, p.JobID)
	cancel()
	r.count(RequestRedeliver, err)
	switch {
	case ctx.Err() != nil:
		return again(nil, 0)
	case errors.Is(err, sume.ErrUnknownJob):
		return closeWith(fmt.Sprintf("the provider does not know job %s (redeliver: 404)", p.JobID))
	case err != nil:
		log.Warn().Err(err).Msg("redeliver failed; polling again later")
		return again(err, r.retryWait(err, p.Attempt))
	}
	log.Info().Str("job_status", status).Msg("job ended undelivered: redelivery asked for")
	res.Fate, res.At = inbox.PollRedelivered, r.cfg.Now()
	res.Next = res.At.Add(r.backoff(p.Redeliveries + 1))
	return res
}

// wait takes a turn of the rate limit, after any pause a Retry-After
// asked for.
func (r *Reconciler) wait(ctx context.Context, limiter <-chan time.Time) error {
	r.mu.Lock()
	pause := r.pauseUntil.Sub(r.cfg.Now())
	r.mu.Unlock()
	if pause > 0 {
		t := time.NewTimer(pause)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	select {
	case <-limiter:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// retryWait is the wait before polling again after err: what a Retry-After
// asked for (every request pauses that long), else the backoff.
func (r *Reconciler) retryWait(err error, polls int64) time.Duration {
	var busy *sume.BusyError
	if errors.As(err, &busy) && busy.RetryAfter > 0 {
		r.mu.Lock()
		if until := r.cfg.Now().Add(busy.RetryAfter); until.After(r.pauseUntil) {
			r.pauseUntil = until
		}
		r.mu.Unlock()
		return max(busy.RetryAfter, r.cfg.Backoff)
	}
	return r.backoff(polls)
}

// backoff is Backoff doubled n-1 times, at most MaxBackoff.
func (r *Reconciler) backoff(n int64) time.Duration {
	d := r.cfg.Backoff
	for i := int64(1); i < n && d < r.cfg.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, r.cfg.MaxBackoff)
}

func (r *Reconciler) count(request string, err error) {
	if r.cfg.OnRequest == nil {
		return
	}
	var busy *sume.BusyError
	switch {
	case err == nil:
		r.cfg.OnRequest(request, ResultOK)
	case errors.Is(err, sume.ErrUnknownJob):
		r.cfg.OnRequest(request, ResultUnknown)
	case errors.As(err, &busy):
		r.cfg.OnRequest(request, ResultBusy)
	default:
		r.cfg.OnRequest(request, ResultFailed)
	}
}
