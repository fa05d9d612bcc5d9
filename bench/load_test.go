package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"inbox/scheme"
)

// jobCounter is a receiver that verifies each delivery and counts how often
// each job arrives.
type jobCounter struct {
	secret string
	mu     sync.Mutex
	seen   map[string]int
	bad    int
}

func (c *jobCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var doc struct {
		JobID string `json:"job_id"`
	}
	if err == nil {
		_, err = scheme.Sume{Tolerance: time.Minute}.Verify(r.Header, body, []scheme.Secret{{Key: []byte(c.secret)}}, time.Now())
	}
	if err == nil {
		err = json.Unmarshal(body, &doc)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil || doc.JobID == "" {
		c.bad++
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	c.seen[doc.JobID]++
	w.WriteHeader(http.StatusNoContent)
}

// TestLoadRepeatShare drives the real load at a receiver that counts jobs:
// the share of repeats it sees is the one asked for, and the CPU window
// counts the deliveries answered in it.
func TestLoadRepeatShare(t *testing.T) {
	for _, share := range []float64{0, 0.5} {
		c := &jobCounter{secret: "whsec_test", seen: map[string]int{}}
		srv := httptest.NewServer(c)
		const conns = 4
		res := load{
			urls:        []string{srv.URL + refPath},
			secret:      c.secret,
			runID:       "t",
			repeats:     newRepeatSchedule(share),
			conns:       conns,
			bodySize:    256,
			warmup:      100 * time.Millisecond,
			duration:    400 * time.Millisecond,
			maxRequests: 1_000_000,
			meter:       newCPUMeter(os.Getpid()).read, // the receiver is in this process
		}.run(t.Context())
		srv.Close()

		var repeatsSeen int64
		for _, n := range c.seen {
			repeatsSeen += int64(n - 1)
		}
		t.Logf("share %v: sent %d, repeats %d, server saw %d jobs and %d repeats, %d delivered, %d in the CPU window, %s receiver CPU",
			share, res.sent, res.repeats, len(c.seen), repeatsSeen, res.delivered, res.cpu.delivered, res.cpu.receiver)
		if c.bad > 0 || res.errors() > 0 {
			t.Fatalf("share %v: %d bad deliveries, %d errors (%s)", share, c.bad, res.errors(), describeErrors(res))
		}
		if res.sent < 100 {
			t.Fatalf("share %v: only %d sent", share, res.sent)
		}
		if repeatsSeen != res.repeats || int64(len(c.seen)) != res.ackedNew {
			t.Errorf("share %v: server saw %d repeats of %d jobs, load says it sent %d repeats, %d new",
				share, repeatsSeen, len(c.seen), res.repeats, res.ackedNew)
		}
		// Each sender repeats every second delivery: half, give or take one a sender.
		if want := float64(res.sent) * share; float64(res.repeats) < want-conns || float64(res.repeats) > want+conns {
			t.Errorf("share %v: %d repeats in %d sent, want %.0f±%d", share, res.repeats, res.sent, want, conns)
		}
		if res.cpuErr != nil {
			t.Fatalf("share %v: CPU not measured: %v", share, res.cpuErr)
		}
		// The window opens as the warmup ends and closes after the last
		// answer: about the measured deliveries, plus those in flight.
		if res.cpu.delivered < res.delivered/2 || res.cpu.delivered > res.delivered+conns {
			t.Errorf("share %v: %d deliveries in the CPU window, %d measured", share, res.cpu.delivered, res.delivered)
		}
		if res.cpu.load <= 0 || res.cpu.wall < 300*time.Millisecond {
			t.Errorf("share %v: CPU window %+v: want CPU time and at least the 400ms measured, less the reading's delay", share, res.cpu)
		}
	}
}

// TestLoadCPUWindowNeverOpens: a load that ends in its warmup has no CPU
// window, and says so rather than report nothing as free.
func TestLoadCPUWindowNeverOpens(t *testing.T) {
	srv := httptest.NewServer(&jobCounter{secret: "s", seen: map[string]int{}})
	defer srv.Close()
	res := load{urls: []string{srv.URL}, secret: "s", runID: "t", conns: 1, bodySize: 64, warmup: time.Hour, duration: time.Second,
		maxRequests: 5, meter: newCPUMeter(os.Getpid()).read}.run(t.Context())
	if res.sent != 5 || res.cpuErr == nil {
		t.Errorf("sent %d, cpuErr %v: want 5 sent and an error", res.sent, res.cpuErr)
	}
	if _, ok := (result{load: res}).cpuPerDelivery(); ok {
		t.Error("a run with no CPU window has a CPU per delivery")
	}
}

// TestLoadSplitsAcrossReplicas drives the load at two receivers as at two
// replicas: each sender's new jobs go to its own, its repeats to the
// other, so both take new work and a job's repeats cross over.
func TestLoadSplitsAcrossReplicas(t *testing.T) {
	a := &jobCounter{secret: "whsec_test", seen: map[string]int{}}
	b := &jobCounter{secret: "whsec_test", seen: map[string]int{}}
	sa, sb := httptest.NewServer(a), httptest.NewServer(b)
	defer sa.Close()
	defer sb.Close()
	res := load{
		urls: []string{sa.URL + refPath, sb.URL + refPath}, secret: a.secret, runID: "t",
		repeats: newRepeatSchedule(0.5), conns: 4, bodySize: 256, warmup: 0, duration: 300 * time.Millisecond,
		maxRequests: 2000, meter: newCPUMeter(os.Getpid()).read,
	}.run(t.Context())
	if res.errors() != 0 || a.bad+b.bad != 0 {
		t.Fatalf("errors: %d, bad %d %d", res.errors(), a.bad, b.bad)
	}
	crossed := 0
	for id := range a.seen {
		if b.seen[id] > 0 {
			crossed++
		}
	}
	t.Logf("replica a saw %d jobs, b %d, %d jobs on both; %d sent, %d repeats", len(a.seen), len(b.seen), crossed, res.sent, res.repeats)
	if len(a.seen) == 0 || len(b.seen) == 0 || crossed == 0 {
		t.Errorf("a saw %d jobs, b %d, %d on both: want the load split and repeats crossing over", len(a.seen), len(b.seen), crossed)
	}
}
