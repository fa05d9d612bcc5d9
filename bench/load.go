package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"inbox/sume"
)

// requestTimeout is the provider's limit per attempt: an answer slower than
// this would be retried, so it counts as an error, not a latency.
const requestTimeout = 10 * time.Second

// errorBackoff keeps a worker from spinning on a receiver that refuses
// connections until the run notices the receiver is gone.
const errorBackoff = 10 * time.Millisecond

// recentBodies is how many of its earlier bodies a worker can repeat.
const recentBodies = 64

// load drives signed deliveries at one receiver, or at its replicas.
type load struct {
	// urls are the receiver's webhook URLs, one per replica. Sender i
	// sends its new deliveries to urls[i%len(urls)] and, with more than
	// one, its repeats to the next one, as a load balancer in front of
	// replicas spreads a provider's retries.
	urls        []string
	secret      string
	runID       string // makes job ids unique to this run and receiver
	randomIDs   bool   // job ids in random order rather than ascending per sender
	repeats     repeatSchedule
	conns       int
	bodySize    int
	warmup      time.Duration
	duration    time.Duration
	maxRequests int64
	// meter reads the CPU time used so far; the load reads it as the
	// warmup ends and again once every sender has stopped.
	meter func() cpuReading
}

// loadResult is what a load run saw. Only answers to requests started after
// the warmup are measured; errors are counted over the whole run, so a
// receiver that fails early cannot hide it in the warmup.
type loadResult struct {
	hist          *histogram
	measured      time.Duration // from the end of the warmup to the last measured answer
	delivered     int64         // 204s to measured requests
	ackedNew      int64         // 204s to a job's first sending, warmup included
	sent          int64
	statuses      map[int]int64 // answers other than 204
	transportErrs int64
	firstErr      error
	dials         int64 // connections opened; conns when keep-alive works
	repeats       int64 // repeats sent
	cpu           cpuWindow
	cpuErr        error // why cpu is unknown
}

func (r loadResult) errors() int64 {
	n := r.transportErrs
	for _, c := range r.statuses {
		n += c
	}
	return n
}

func (r loadResult) rate() float64 {
	if r.measured <= 0 {
		return 0
	}
	return float64(r.delivered) / r.measured.Seconds()
}

// worker is one connection's loop and its own counters.
type worker struct {
	id            int
	hist          *histogram
	delivered     int64
	ackedNew      int64
	sent          int64
	statuses      map[int]int64
	transportErrs int64
	firstErr      error
	lastDone      time.Time
	repeats       int64
	inCPUWindow   int64 // 204s that arrived after the CPU window opened
}

// run sends until the warmup and duration have passed, maxRequests have
// been sent, or ctx is done, and returns what it saw.
func (l load) run(ctx context.Context) loadResult {
	measureFrom := time.Now().Add(l.warmup)
	stopAt := measureFrom.Add(l.duration)
	var budget, dials atomic.Int64
	budget.Store(l.maxRequests)
	seed := rand.Uint64()

	// The CPU window opens with a reading as the warmup ends; answers count
	// toward it only once the reading is taken, so none is counted whose
	// CPU time could fall before it.
	var cpuOpen atomic.Bool
	var from cpuReading
	opened := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(opened)
		t := time.NewTimer(time.Until(measureFrom))
		defer t.Stop()
		select {
		case <-t.C:
		case <-stopped:
			return
		case <-ctx.Done():
			return
		}
		from = l.meter()
		cpuOpen.Store(true)
	}()

	workers := make([]*worker, l.conns)
	var wg sync.WaitGroup
	for i := range workers {
		w := &worker{id: i, hist: newHistogram(), statuses: map[int]int64{}}
		workers[i] = w
		wg.Go(func() {
			w.loop(ctx, l, measureFrom, stopAt, &budget, &dials, &cpuOpen, rand.New(rand.NewPCG(seed, uint64(i))))
		})
	}
	wg.Wait()
	close(stopped)
	<-opened

	res := loadResult{hist: newHistogram(), statuses: map[int]int64{}, dials: dials.Load()}
	var inCPUWindow int64
	var last time.Time
	for _, w := range workers {
		res.hist.merge(w.hist)
		res.delivered += w.delivered
		res.ackedNew += w.ackedNew
		res.sent += w.sent
		res.transportErrs += w.transportErrs
		res.repeats += w.repeats
		inCPUWindow += w.inCPUWindow
		for code, n := range w.statuses {
			res.statuses[code] += n
		}
		if res.firstErr == nil {
			res.firstErr = w.firstErr
		}
		if w.lastDone.After(last) {
			last = w.lastDone
		}
	}
	if res.delivered > 0 {
		res.measured = last.Sub(measureFrom)
	}
	if cpuOpen.Load() {
		res.cpu, res.cpuErr = cpuBetween(from, l.meter(), inCPUWindow)
	} else {
		res.cpuErr = errors.New("the load ended before the warmup did")
	}
	return res
}

func (w *worker) loop(ctx context.Context, l load, measureFrom, stopAt time.Time, budget, dials *atomic.Int64, cpuOpen *atomic.Bool, rng *rand.Rand) {
	// A transport per worker holding at most one connection to each
	// replica: each worker is one sender on one keep-alive connection (one
	// per replica), as the provider's senders are.
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return dialer.DialContext(ctx, network, addr)
		},
		MaxConnsPerHost:     1,
		MaxIdleConnsPerHost: 1,
		DisableCompression:  true,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: requestTimeout}

	recent := make([][]byte, 0, recentBodies)
	for seq, fresh := 0, 0; ; seq++ {
		start := time.Now()
		if !start.Before(stopAt) || ctx.Err() != nil || budget.Add(-1) < 0 {
			return
		}
		// A repeat is the same bytes as an earlier delivery, signed afresh,
		// as the provider re-signs each retry.
		var body []byte
		repeat := l.repeats.at(seq) && len(recent) > 0
		if repeat {
			body = recent[rng.IntN(len(recent))]
			w.repeats++
		} else {
			body = l.body(w.id, fresh, rng)
			if len(recent) < recentBodies {
				recent = append(recent, body)
			} else {
				recent[fresh%recentBodies] = body
			}
			fresh++
		}

		url := l.urls[w.id%len(l.urls)]
		if repeat {
			url = l.urls[(w.id+1)%len(l.urls)]
		}
		status, err := l.send(ctx, client, url, body)
		done := time.Now()
		w.sent++
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			w.transportErrs++
			if w.firstErr == nil {
				w.firstErr = err
			}
			select {
			case <-time.After(errorBackoff):
			case <-ctx.Done():
				return
			}
			continue
		}
		if status != http.StatusNoContent {
			w.statuses[status]++
			continue
		}
		if !repeat {
			w.ackedNew++
		}
		if cpuOpen.Load() {
			w.inCPUWindow++
		}
		if !start.Before(measureFrom) {
			w.hist.add(done.Sub(start))
			w.delivered++
			w.lastDone = done
		}
	}
}

// send posts one signed delivery and returns the status code.
func (l load) send(ctx context.Context, client *http.Client, url string, body []byte) (int, error) {
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(sume.HeaderTimestamp, ts)
	req.Header.Set(sume.HeaderSignature, sume.SignatureHeader(ts, body, l.secret))
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	// Read the answer to its end so the connection can be reused.
	if _, err := io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)); err != nil {
		return 0, err
	}
	return resp.StatusCode, nil
}

// body returns a new job's delivery of about l.bodySize bytes (never less
// than the JSON around the padding), with a job_id unique to the run, the
// worker and the job's number. Ascending ids insert at one place per sender
// in the primary key's index; random ones anywhere, which dirties more
// pages per commit.
func (l load) body(worker, n int, rng *rand.Rand) []byte {
	const tail = `"}}`
	b := make([]byte, 0, l.bodySize+128)
	b = append(b, `{"event":"job.completed","job_id":"job_`...)
	b = append(b, l.runID...)
	b = append(b, '_')
	if l.randomIDs {
		b = strconv.AppendUint(b, rng.Uint64(), 36)
		b = append(b, '_')
	}
	b = strconv.AppendInt(b, int64(worker), 10)
	b = append(b, '_')
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, `","status":"COMPLETED","payload":{"output":"`...)
	for i := 0; len(b)+len(tail) < l.bodySize; i++ {
		b = append(b, "abcdefghijklmnopqrstuvwxyz0123456789"[i%36])
	}
	return append(b, tail...)
}
