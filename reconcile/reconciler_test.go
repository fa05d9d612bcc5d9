package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"inbox/inbox"
	"inbox/reconcile"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
	"inbox/sume"
)

const apiKey = "sk_reconcile_unit_key"

// api stands in for Sume's API: GET /v1/jobs/{id} answers answer(job),
// POST .../webhook/redeliver answers 202; every call is counted, with its
// time.
type api struct {
	t      *testing.T
	srv    *httptest.Server
	answer func(job string) (int, string, string) // status, body, Retry-After
	mu     sync.Mutex
	gets   map[string]int
	posts  map[string]int
	times  []time.Time
}

func newAPI(t *testing.T, answer func(job string) (int, string, string)) *api {
	a := &api{t: t, answer: answer, gets: map[string]int{}, posts: map[string]int{}}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+apiKey {
			t.Errorf("%s %s without the bearer key", r.Method, r.URL.Path)
		}
		job, _ := strings.CutPrefix(r.URL.Path, "/v1/jobs/")
		a.mu.Lock()
		a.times = append(a.times, time.Now())
		if j, ok := strings.CutSuffix(job, "/webhook/redeliver"); ok && r.Method == http.MethodPost {
			a.posts[j]++
			a.mu.Unlock()
			w.WriteHeader(http.StatusAccepted)
			return
		}
		a.gets[job]++
		a.mu.Unlock()
		code, body, retry := a.answer(job)
		if retry != "" {
			w.Header().Set("Retry-After", retry)
		}
		w.WriteHeader(code)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *api) client() *sume.Client {
	return &sume.Client{BaseURL: a.srv.URL, APIKey: apiKey, Retries: -1}
}

func (a *api) counts() (gets, posts map[string]int, times []time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	g, p := map[string]int{}, map[string]int{}
	for k, v := range a.gets {
		g[k] = v
	}
	for k, v := range a.posts {
		p[k] = v
	}
	return g, p, append([]time.Time(nil), a.times...)
}

// run runs r for d, then stops it and returns Run's error.
func run(t *testing.T, d time.Duration, rs ...*reconcile.Reconciler) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.Run(ctx); err != nil {
				t.Errorf("run: %v", err)
			}
		}()
	}
	wg.Wait()
}

func newReconciler(t *testing.T, s reconcile.Store, cfg reconcile.Config) *reconcile.Reconciler {
	t.Helper()
	if cfg.PollEvery == 0 {
		cfg.PollEvery = 50 * time.Millisecond
	}
	r, err := reconcile.New(s, cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRefusalsBounded fills the memory past its bound: the keys beyond it
// are dropped and counted, repeats of a held key still count, and what is
// held reaches the store.
func TestRefusalsBounded(t *testing.T) {
	t.Parallel()
	s := sqlitetest.MustOpen(t, sqlite.Options{})
	mem := reconcile.NewRefusals(3, nil)
	for _, key := range []string{"job_1", "job_2", "job_1", "job_3", "job_4", "job_5", "job_2"} {
		mem.Add(inbox.Delivery{Source: "sume", Key: key, JobID: key, Event: "job.completed", Body: []byte("the body")}, errors.New("store down"))
	}
	if mem.Len() != 3 || mem.Dropped() != 2 {
		t.Fatalf("held %d, dropped %d; want 3 and 2", mem.Len(), mem.Dropped())
	}
	run(t, 300*time.Millisecond, newReconciler(t, s, reconcile.Config{Refusals: mem, FlushEvery: 50 * time.Millisecond}))
	missed, err := s.Missed(context.Background(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, m := range missed {
		got[m.Key] = m.Count
	}
	if len(got) != 3 || got["job_1"] != 2 || got["job_2"] != 2 || got["job_3"] != 1 || mem.Len() != 0 {
		t.Errorf("missed %v, %d still held; want job_1 x2, job_2 x2, job_3 x1, none held", got, mem.Len())
	}
}

// TestTwoPollersAskOnce runs two reconcilers, each on its own connection to
// one database as two replicas would, over the same overdue jobs: each job
// is redelivered exactly once.
func TestTwoPollersAskOnce(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "inbox.db")
	s1 := sqlitetest.MustOpenPath(t, path, sqlite.Options{})
	s2 := sqlitetest.MustOpenPath(t, path, sqlite.Options{})
	a := newAPI(t, func(string) (int, string, string) { return 200, `{"status":"COMPLETED"}`, "" })
	var jobs []string
	for i := range 20 {
		jobs = append(jobs, fmt.Sprintf("job_%d", i))
	}
	if _, err := s1.Expect(context.Background(), jobs, "", time.Now()); err != nil {
		t.Fatal(err)
	}
	cfg := reconcile.Config{API: a.client(), Backoff: time.Hour, Concurrency: 4, Rate: 200}
	run(t, 1500*time.Millisecond, newReconciler(t, s1, cfg), newReconciler(t, s2, cfg))
	gets, posts, _ := a.counts()
	t.Logf("status polls %d jobs, redeliveries %d jobs", len(gets), len(posts))
	for _, job := range jobs {
		if posts[job] != 1 || gets[job] != 1 {
			t.Errorf("%s: %d polls, %d redeliveries; want one of each", job, gets[job], posts[job])
		}
	}
}

// TestRetryAfterAndRate answers every status poll 429 with Retry-After: 2:
// no request follows within those 2 s, and the job's next poll is at
// least that far away. Then, over many running jobs, the request rate
// stays within the configured one. Each has a store and an API of its
// own, so they run side by side.
func TestRetryAfterAndRate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("retry after", func(t *testing.T) {
		t.Parallel()
		s := sqlitetest.MustOpen(t, sqlite.Options{})
		busy := newAPI(t, func(string) (int, string, string) { return http.StatusTooManyRequests, "", "2" })
		if _, err := s.Expect(ctx, []string{"job_a", "job_b"}, "", time.Now()); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		run(t, 1500*time.Millisecond, newReconciler(t, s, reconcile.Config{API: busy.client(), Backoff: 100 * time.Millisecond, Concurrency: 1, Rate: 100}))
		_, _, times := busy.counts()
		// The first answer pauses every request: job_b waits too.
		if len(times) != 1 {
			t.Errorf("%d requests in 1.5 s after a Retry-After: 2, want 1", len(times))
		}
		exp, err := s.Expected(ctx, time.Now(), false)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range exp {
			if e.JobID == "job_a" && e.Polls > 0 && e.NextPollAt.Before(start.Add(2*time.Second)) {
				t.Errorf("job_a polled again at %s, before the 2 s asked for", e.NextPollAt.Sub(start))
			}
		}
	})
	t.Run("rate", func(t *testing.T) {
		t.Parallel()
		s := sqlitetest.MustOpen(t, sqlite.Options{})
		running := newAPI(t, func(string) (int, string, string) { return 200, `{"status":"RUNNING"}`, "" })
		var jobs []string
		for i := range 40 {
			jobs = append(jobs, fmt.Sprintf("job_%d", i))
		}
		if _, err := s.Expect(ctx, jobs, "", time.Now()); err != nil {
			t.Fatal(err)
		}
		const rate = 10
		window := 2 * time.Second
		run(t, window, newReconciler(t, s, reconcile.Config{API: running.client(), Backoff: time.Hour, Concurrency: 4, Rate: rate}))
		gets, posts, _ := running.counts()
		n := 0
		for _, v := range gets {
			n += v
		}
		perSecond := float64(n) / window.Seconds()
		t.Logf("%d status requests in %s: %.1f a second, bound %d", n, window, perSecond, rate)
		// One extra for the limiter's first tick, which is immediate.
		if n > rate*int(window/time.Second)+1 || len(posts) != 0 {
			t.Errorf("%d requests in %s at --api-rate %d (and %d redeliveries of running jobs)", n, window, rate, len(posts))
		}
		if n < rate/2 {
			t.Errorf("only %d requests in %s: the poller hardly polled", n, window)
		}
	})
}

// claims records, for each job, until when the claims that took it hold.
type claims struct {
	reconcile.Store
	mu    sync.Mutex
	until map[string][]time.Time
}

func (c *claims) ClaimPolls(ctx context.Context, owner string, now, until time.Time, max int) ([]inbox.Poll, error) {
	polls, err := c.Store.ClaimPolls(ctx, owner, now, until, max)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range polls {
		c.until[p.JobID] = append(c.until[p.JobID], until)
	}
	return polls, err
}

// TestPollsEndBeforeTheLease claims polls whose requests take a third of
// the lease each, one at a time, on a clock that runs 50 times fast: no
// request starts in the last fifth of the lease it was claimed under (and
// a request is cut at that point, on the real clock), so another replica
// claiming the expectation once the lease is over never asks the provider
// about a job this one is still asking about; a poll there is no time
// left for is released and claimed again.
func TestPollsEndBeforeTheLease(t *testing.T) {
	// Not parallel: on a clock 50 times fast, a request held up 80 ms on its
	// way would seem to start in the last fifth of its lease.
	const scale, lease = 50, 30 * time.Second
	base := time.Now()
	now := func() time.Time { return base.Add(time.Since(base) * scale) }
	s := sqlitetest.MustOpen(t, sqlite.Options{})
	c := &claims{Store: s, until: map[string][]time.Time{}}
	var late []string // read once Run has ended
	a := newAPI(t, func(job string) (int, string, string) {
		c.mu.Lock()
		if u := c.until[job]; len(u) == 0 || now().After(u[len(u)-1].Add(-lease/5)) {
			late = append(late, job)
		}
		c.mu.Unlock()
		time.Sleep(lease / 3 / scale)
		return 200, `{"status":"RUNNING"}`, ""
	})
	jobs := []string{"job_a", "job_b", "job_c", "job_d"}
	if _, err := s.Expect(context.Background(), jobs, "", now()); err != nil {
		t.Fatal(err)
	}
	run(t, 2*time.Second, newReconciler(t, c, reconcile.Config{API: a.client(), Backoff: time.Hour,
		Concurrency: 1, Rate: 1000, Lease: lease, Now: now}))
	gets, _, _ := a.counts()
	c.mu.Lock()
	reclaimed := 0
	for _, u := range c.until {
		reclaimed += len(u) - 1
	}
	c.mu.Unlock()
	t.Logf("status polls %v; %d polls released and claimed again; requests started late: %v", gets, reclaimed, late)
	if len(late) > 0 {
		t.Errorf("requests for %v started in the last fifth of their lease", late)
	}
	for _, job := range jobs {
		if gets[job] != 1 {
			t.Errorf("%s polled %d times, want once", job, gets[job])
		}
	}
	if reclaimed == 0 {
		t.Error("no poll was released: the test did not reach the lease's end")
	}
}
