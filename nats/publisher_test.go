package nats_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"inbox/dispatch"
	"inbox/inbox"
	"inbox/nats"
	"inbox/nats/natstest"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
	"inbox/testport"
)

const subject = "sume.jobs.terminal"

// runServer starts an embedded nats-server with JetStream on a random port,
// stored in a temporary folder, for the test's length.
func runServer(t *testing.T) *server.Server {
	t.Helper()
	return runServerAt(t, server.RANDOM_PORT, filepath.Join(t.TempDir(), "js"))
}

// runServerAt starts an embedded nats-server with JetStream on port,
// storing in dir: run it again on the same port and folder to bring a
// server back with its streams.
func runServerAt(t *testing.T, port int, dir string) *server.Server {
	t.Helper()
	return natstest.Run(t, &server.Options{
		Host: "127.0.0.1", Port: port,
		JetStream: true, StoreDir: dir,
		NoLog: true, NoSigs: true,
	})
}

// freePort returns a port nothing listens on now, for a server started
// later.
func freePort(t *testing.T) int {
	t.Helper()
	return testport.Later(t)
}

// waitFor polls cond every 10ms until it holds, failing after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// addStream creates the stream JOBS over sume.jobs.> and returns a handle
// on it.
func addStream(t *testing.T, s *server.Server) jetstream.Stream {
	t.Helper()
	nc, err := natsgo.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.CreateStream(context.Background(), jetstream.StreamConfig{
		Name: "JOBS", Subjects: []string{"sume.jobs.>"}, Duplicates: 2 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func connect(t *testing.T, s *server.Server) *nats.Publisher {
	t.Helper()
	p, err := nats.Connect(s.ClientURL(), subject, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	if err := p.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p
}

func body(id string) []byte {
	return []byte(fmt.Sprintf(`{"event":"job.completed","job_id":%q,"status":"COMPLETED"}`, id))
}

// TestConnectChecksStream: with no stream over the subject, Check says
// so; with one, it finds it. Connect refuses only what no server could
// change: a subject that is not literal, a URL of another scheme.
func TestConnectChecksStream(t *testing.T) {
	t.Parallel() // a server of its own
	s := runServer(t)
	p, err := nats.Connect(s.ClientURL(), subject, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	err = p.Check(context.Background())
	if !errors.Is(err, nats.ErrNoStream) || !strings.Contains(err.Error(), `no JetStream stream covers subject "sume.jobs.terminal"`) {
		t.Fatalf("no stream: err = %v", err)
	}
	if ok, state := p.State(context.Background()); ok || !strings.Contains(state, "no JetStream stream") {
		t.Errorf("no stream: state %v %q", ok, state)
	}
	addStream(t, s)
	if err := p.Check(context.Background()); err != nil || p.Stream() != "JOBS" {
		t.Errorf("stream = %q, %v; want JOBS", p.Stream(), err)
	}
	if ok, state := p.State(context.Background()); !ok || state != "connected, stream JOBS" {
		t.Errorf("state %v %q", ok, state)
	}
	for _, bad := range []string{"", "sume.jobs.>", "sume.*.x", "a b"} {
		if _, err := nats.Connect(s.ClientURL(), bad, zerolog.Nop()); err == nil {
			t.Errorf("subject %q accepted", bad)
		}
	}
	for _, bad := range []string{"http://127.0.0.1:4222", "nats://", "nats://u:hunter2@127.0.0.1:4222,ftp://x"} {
		_, err := nats.Connect(bad, subject, zerolog.Nop())
		if err == nil || !strings.Contains(err.Error(), "nats URL") || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("URL %q: %v", bad, err)
		}
	}
}

func TestConnectWithoutJetStream(t *testing.T) {
	t.Parallel() // a server of its own
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	defer s.Shutdown()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	p, err := nats.Connect(s.ClientURL(), subject, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Check(context.Background()); !errors.Is(err, nats.ErrNoStream) || !strings.Contains(err.Error(), "JetStream is not enabled") {
		t.Errorf("err = %v", err)
	}
}

// gauge reads inbox_nats_connected.
func gauge(t *testing.T, p *nats.Publisher) float64 {
	t.Helper()
	return testutil.ToFloat64(p.Collector())
}

// TestStartWhileDown connects while no server listens: Connect returns at
// once, publishes fail at once without being kept, the state and the gauge
// say unreachable; once a server comes up the connection is made in the
// background and publishing works, and nothing tried meanwhile reaches
// the stream.
func TestStartWhileDown(t *testing.T) {
	t.Parallel() // a server of its own
	port := freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	start := time.Now()
	p, err := nats.Connect(url, subject, zerolog.Nop())
	if err != nil {
		t.Fatalf("connect with the server down: %v", err)
	}
	defer p.Close()
	t.Logf("Connect returned in %s with the server down", time.Since(start))
	if err := p.Check(context.Background()); !errors.Is(err, nats.ErrUnreachable) {
		t.Errorf("check: %v, want unreachable", err)
	}
	if ok, state := p.State(context.Background()); ok || !strings.Contains(state, "unreachable") {
		t.Errorf("state %v %q, want unreachable", ok, state)
	}
	if g := gauge(t, p); g != 0 {
		t.Errorf("inbox_nats_connected = %v, want 0", g)
	}
	job := inbox.Job{ID: "job_1", Event: "job.completed", Body: body("job_1"), Attempt: 1}
	for range 3 {
		start := time.Now()
		err := p.Deliver(context.Background(), job)
		took := time.Since(start)
		if !errors.Is(err, nats.ErrUnreachable) || dispatch.Rejected(err) || took > time.Second {
			t.Errorf("publish while down: %v after %s, want unreachable at once, retried", err, took)
		}
		job.Attempt++
	}

	s := runServerAt(t, port, filepath.Join(t.TempDir(), "js"))
	st := addStream(t, s)
	waitFor(t, 15*time.Second, "connected", func() bool { ok, _ := p.State(context.Background()); return ok })
	if g := gauge(t, p); g != 1 {
		t.Errorf("inbox_nats_connected = %v, want 1", g)
	}
	ack, err := p.Publish(context.Background(), job)
	if err != nil || ack.Duplicate {
		t.Fatalf("publish once up: %+v, %v", ack, err)
	}
	info, err := st.Info(context.Background())
	if err != nil || info.State.Msgs != 1 {
		t.Fatalf("stream: %+v, %v; want only the publish made once up", info, err)
	}
	msg, err := st.GetMsg(context.Background(), ack.Sequence)
	if err != nil || msg.Header.Get(nats.HeaderAttempt) != "4" {
		t.Errorf("message %v, %v; want attempt 4's", msg, err)
	}
}

// TestRepeatDropped publishes one job twice: the stream keeps one message.
func TestRepeatDropped(t *testing.T) {
	t.Parallel() // a server of its own
	s := runServer(t)
	st := addStream(t, s)
	p := connect(t, s)
	job := inbox.Job{ID: "job_1", Event: "job.completed", Body: body("job_1"), Attempt: 1}
	first, err := p.Publish(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	job.Attempt = 2
	again, err := p.Publish(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	if first.Duplicate || !again.Duplicate || again.Sequence != first.Sequence {
		t.Errorf("acks %+v then %+v, want the repeat a duplicate of the first", first, again)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Errorf("stream holds %d messages, want 1", info.State.Msgs)
	}
	msg, err := st.GetMsg(context.Background(), first.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	if string(msg.Data) != string(body("job_1")) || msg.Header.Get(natsgo.MsgIdHdr) != "job_1" ||
		msg.Header.Get(nats.HeaderEvent) != "job.completed" || msg.Header.Get(nats.HeaderAttempt) != "1" {
		t.Errorf("message %q %v", msg.Data, msg.Header)
	}
}

// TestDispatchToStream runs the dispatcher into the stream. One row's
// earlier publish was acknowledged but never recorded (its dispatcher died
// holding the lease): it is published again once the lease runs out, the
// stream drops the repeat, and every row ends done, each on the stream once.
func TestDispatchToStream(t *testing.T) {
	t.Parallel() // a server of its own
	s := runServer(t)
	st := addStream(t, s)
	p := connect(t, s)
	now := time.Now()
	store := sqlitetest.MustOpen(t, sqlite.Options{})
	rules := inbox.Rules{Events: []string{"job.completed"}}
	const n = 200
	for i := range n {
		if _, err := store.Put(context.Background(), inbox.Classify("", inbox.Named{}, body(fmt.Sprintf("job_%03d", i)), 1, rules)); err != nil {
			t.Fatal(err)
		}
	}
	// A dispatcher that died after the stream acknowledged job_000; its
	// lease runs out a second from now.
	lost, _, err := store.Settle(context.Background(), "dead", nil, inbox.Claim{Now: now, Until: now.Add(time.Second), Max: 1})
	if err != nil || len(lost) != 1 {
		t.Fatal(lost, err)
	}
	if lost, err = store.Start(context.Background(), "dead", lost, now, now.Add(time.Second)); err != nil || len(lost) != 1 {
		t.Fatal(lost, err)
	}
	if _, err := p.Publish(context.Background(), lost[0]); err != nil {
		t.Fatal(err)
	}

	d, err := dispatch.New(store, dispatch.Config{Destination: p, Workers: 8, Poll: time.Millisecond, Lease: time.Minute, Timeout: 10 * time.Second}, zerolog.New(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		stats, err := store.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if stats.ByStatus[inbox.StatusDone] == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rows %v", stats.ByStatus)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != n {
		t.Errorf("stream holds %d messages, want %d: one per row", info.State.Msgs, n)
	}
	seen := map[string]bool{}
	for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
		msg, err := st.GetMsg(context.Background(), seq)
		if err != nil {
			t.Fatal(err)
		}
		seen[msg.Header.Get(natsgo.MsgIdHdr)] = true
	}
	if len(seen) != n {
		t.Errorf("%d distinct job ids on the stream, want %d", len(seen), n)
	}
	if e, err := store.Get(context.Background(), "job_000"); err != nil || e.Attempts != 2 {
		t.Errorf("job_000 = %+v, %v; want done at attempt 2", e, err)
	}
}

// TestServerDown: a publish to a server that went away fails, to be
// retried.
func TestServerDown(t *testing.T) {
	t.Parallel() // a server of its own
	s := runServer(t)
	addStream(t, s)
	p := connect(t, s)
	s.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := p.Deliver(ctx, inbox.Job{ID: "job_1", Body: body("job_1"), Attempt: 1}); err == nil || dispatch.Rejected(err) {
		t.Errorf("err = %v, want a retried failure", err)
	}
}

// TestPublishKeys publishes a Vibe row: the message names its source, the
// provider's own key (the runId) as Inbox-Key and Idempotency-Key, and the
// row id; Nats-Msg-Id stays the row id, unique across sources, so the
// stream never drops one source's job as another's repeat.
func TestPublishKeys(t *testing.T) {
	t.Parallel() // a server of its own
	s := runServer(t)
	st := addStream(t, s)
	p := connect(t, s)
	job := inbox.Job{ID: "vibe/run_1", Source: "vibe", Key: "run_1", Event: "scheduled_job.run", Body: body("run_1"), Attempt: 1}
	ack, err := p.Publish(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := st.GetMsg(context.Background(), ack.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	for h, want := range map[string]string{
		natsgo.MsgIdHdr: "vibe/run_1", nats.HeaderRowID: "vibe/run_1", nats.HeaderSource: "vibe",
		nats.HeaderKey: "run_1", nats.HeaderIdempotencyKey: "run_1", nats.HeaderAttempt: "1",
	} {
		if got := msg.Header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
}

// streamMessages reads every message of the stream JOBS on the server at
// url: the Inbox-Attempt of each, per message id.
func streamMessages(t *testing.T, url string) map[string][]string {
	t.Helper()
	nc, err := natsgo.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := js.Stream(ctx, "JOBS")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		msg, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		id := msg.Header.Get(natsgo.MsgIdHdr)
		out[id] = append(out[id], msg.Header.Get(nats.HeaderAttempt))
	}
	return out
}

// TestOutagePauses runs the dispatcher into the stream, takes the server
// down between deliveries, stores rows while it is down for ten times the
// whole retry schedule, and brings it back on the same port and store.
// Meanwhile the dispatcher is paused (inbox_dispatch_paused 1): the rows
// stay new, unclaimed, with no attempt counted, so none parks. Once the
// server is back the dispatcher resumes within about a second, every row
// ends done, on the stream exactly once, and that message is the attempt
// the row says succeeded (the first, for the rows stored while down): no
// attempt counted failed reached the stream later (nats.go's reconnect
// buffer would send them on reconnection).
func TestOutagePauses(t *testing.T) {
	t.Parallel() // a server of its own
	dir := filepath.Join(t.TempDir(), "js")
	s := runServerAt(t, server.RANDOM_PORT, dir)
	port := s.Addr().(*net.TCPAddr).Port
	url := s.ClientURL()
	addStream(t, s)
	p := connect(t, s)
	store := sqlitetest.MustOpen(t, sqlite.Options{})
	rules := inbox.Rules{Events: []string{"job.completed"}}
	put := func(prefix string, n int) []string {
		var ids []string
		for i := range n {
			id := fmt.Sprintf("%s_%03d", prefix, i)
			if _, err := store.Put(context.Background(), inbox.Classify("", inbox.Named{}, body(id), 1, rules)); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		return ids
	}
	row := func(id string) inbox.Event {
		e, err := store.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	done := func() int {
		st, err := store.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return int(st.ByStatus[inbox.StatusDone])
	}
	reg := prometheus.NewRegistry()
	paused := func() float64 { return gathered(t, reg, "inbox_dispatch_paused") }
	schedule := []time.Duration{50 * time.Millisecond, 100 * time.Millisecond}
	d, err := dispatch.New(store, dispatch.Config{Destination: p, Workers: 4, Poll: 5 * time.Millisecond,
		Lease: 10 * time.Second, Timeout: time.Second, Schedule: schedule, Registerer: reg}, zerolog.New(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-ran; err != nil {
			t.Error(err)
		}
	}()

	before := put("up", 20)
	waitFor(t, 20*time.Second, "rows published while up", func() bool { return done() == len(before) })
	if g := paused(); g != 0 {
		t.Errorf("inbox_dispatch_paused = %v while up, want 0", g)
	}
	s.Shutdown()
	s.WaitForShutdown()
	waitFor(t, 5*time.Second, "not ready", func() bool { return errors.Is(p.Ready(), nats.ErrUnreachable) })
	waitFor(t, 5*time.Second, "paused", func() bool { return paused() == 1 })
	during := put("down", 30)
	var whole time.Duration
	for _, w := range schedule {
		whole += w
	}
	time.Sleep(10 * whole)
	for _, id := range during {
		if e := row(id); e.Status != inbox.StatusNew || e.Attempts != 0 || e.LeaseOwner != "" {
			t.Errorf("%s after %s down: %s, %d attempts, lease %q; want new, unclaimed, no attempt", id, 10*whole, e.Status, e.Attempts, e.LeaseOwner)
		}
	}
	if ok, state := p.State(context.Background()); ok || !strings.Contains(state, "dispatch paused") {
		t.Errorf("state %v %q, want unreachable, dispatch paused", ok, state)
	}

	up := time.Now()
	runServerAt(t, port, dir)
	waitFor(t, 15*time.Second, "ready", func() bool { return p.Ready() == nil })
	ready := time.Now()
	all := append(before, during...)
	waitFor(t, 15*time.Second, "the first row stored while down done", func() bool { return done() > len(before) })
	resumed := time.Since(ready)
	waitFor(t, 30*time.Second, "every row done after the server came back", func() bool { return done() == len(all) })
	t.Logf("server back: connected after %s, the first row done %s after that, all %d rows done %s after the server started",
		ready.Sub(up), resumed, len(during), time.Since(up))
	if resumed > time.Second {
		t.Errorf("the first row was done %s after the connection was back, want within a second", resumed)
	}
	if g := paused(); g != 0 {
		t.Errorf("inbox_dispatch_paused = %v once back, want 0", g)
	}

	msgs := streamMessages(t, url)
	for _, id := range all {
		e := row(id)
		want := strconv.FormatInt(e.Attempts, 10)
		if got := msgs[id]; len(got) != 1 || got[0] != want {
			t.Errorf("%s: messages with attempts %v on the stream, want one, of attempt %s (the row's)", id, got, want)
		}
		if strings.HasPrefix(id, "down_") && e.Attempts != 1 {
			t.Errorf("%s: done at attempt %d, want 1: nothing is attempted while the server is down", id, e.Attempts)
		}
	}
	if len(msgs) != len(all) {
		t.Errorf("%d job ids on the stream, want %d", len(msgs), len(all))
	}
}

// gathered returns the value of the gauge name on reg.
func gathered(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

// dispatcher runs a dispatcher of store into p until the test ends, with a
// schedule of 50ms and 100ms, and returns its registry.
func dispatcher(t *testing.T, store *sqlite.Store, p *nats.Publisher) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	d, err := dispatch.New(store, dispatch.Config{Destination: p, Workers: 4, Poll: 5 * time.Millisecond,
		Lease: 10 * time.Second, Timeout: time.Second, Schedule: []time.Duration{50 * time.Millisecond, 100 * time.Millisecond},
		Registerer: reg}, zerolog.New(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil {
			t.Error(err)
		}
	})
	return reg
}

// putRows stores a new row for each of n ids made of prefix.
func putRows(t *testing.T, store *sqlite.Store, prefix string, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		id := fmt.Sprintf("%s_%03d", prefix, i)
		if _, err := store.Put(context.Background(), inbox.Classify("", inbox.Named{}, body(id), 1, inbox.Rules{Events: []string{"job.completed"}})); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// checkUnattempted fails for each row of ids that is not new, unclaimed,
// with no attempt counted.
func checkUnattempted(t *testing.T, store *sqlite.Store, ids []string) {
	t.Helper()
	for _, id := range ids {
		e, err := store.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if e.Status != inbox.StatusNew || e.Attempts != 0 || e.LeaseOwner != "" {
			t.Errorf("%s while paused: %s, %d attempts, lease %q; want new, unclaimed, no attempt", id, e.Status, e.Attempts, e.LeaseOwner)
		}
	}
}

// checkOnce waits for every row of ids to be done, then fails for each
// that is not on the stream once, as the attempt the row says succeeded;
// for the rows of cut, whose publishes were under way when the link went,
// any attempt up to that one (an earlier may have been stored, its
// acknowledgement lost, and the retry acknowledged as its duplicate).
func checkOnce(t *testing.T, store *sqlite.Store, url string, ids []string, cut ...string) {
	t.Helper()
	waitFor(t, 30*time.Second, "every row done", func() bool {
		st, err := store.Stats(context.Background())
		return err == nil && st.ByStatus[inbox.StatusDone] == int64(len(ids))
	})
	msgs := streamMessages(t, url)
	for _, id := range ids {
		e, err := store.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		got := msgs[id]
		if len(got) != 1 {
			t.Errorf("%s: messages with attempts %v on the stream, want one", id, got)
			continue
		}
		n, _ := strconv.Atoi(got[0])
		if n != int(e.Attempts) && (!slices.Contains(cut, id) || n < 1 || n > int(e.Attempts)) {
			t.Errorf("%s: the message on the stream is attempt %d, the row succeeded at attempt %d", id, n, e.Attempts)
		}
	}
	if len(msgs) != len(ids) {
		t.Errorf("%d job ids on the stream, want %d", len(msgs), len(ids))
	}
}

// TestNoStreamPauses deletes the stream under a running dispatcher: the
// first publish that finds no stream answering fails and counts, and the
// dispatcher pauses; rows stored meanwhile, for ten times the whole
// schedule, are not attempted, and /readyz's line says why. Once the
// stream is made again the dispatcher resumes within about a second (one
// lookup a second) and every row reaches it once.
func TestNoStreamPauses(t *testing.T) {
	t.Parallel() // a server of its own
	s := runServer(t)
	st := addStream(t, s)
	p := connect(t, s)
	store := sqlitetest.MustOpen(t, sqlite.Options{})
	reg := dispatcher(t, store, p)
	if err := st.Purge(context.Background()); err != nil {
		t.Fatal(err)
	}
	nc, err := natsgo.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(context.Background(), "JOBS"); err != nil {
		t.Fatal(err)
	}
	first := putRows(t, store, "first", 1)
	waitFor(t, 10*time.Second, "paused", func() bool { return gathered(t, reg, "inbox_dispatch_paused") == 1 })
	if err := p.Ready(); !errors.Is(err, nats.ErrNoStream) {
		t.Errorf("ready: %v, want no stream", err)
	}
	later := putRows(t, store, "later", 20)
	time.Sleep(1500 * time.Millisecond)
	checkUnattempted(t, store, later)
	if ok, state := p.State(context.Background()); ok || !strings.Contains(state, "no JetStream stream answers for subject "+subject+": dispatch paused") {
		t.Errorf("state %v %q", ok, state)
	}
	back := time.Now()
	addStream(t, s)
	waitFor(t, 10*time.Second, "resumed", func() bool { return gathered(t, reg, "inbox_dispatch_paused") == 0 })
	t.Logf("resumed %s after the stream was made again", time.Since(back))
	if took := time.Since(back); took > 3*time.Second {
		t.Errorf("resumed %s after the stream was back, want about a second (lookups once a second)", took)
	}
	checkOnce(t, store, s.ClientURL(), append(first, later...))
}

// proxy forwards TCP connections to a server, and can freeze them all: a
// link that stops passing bytes while both ends stay open, as a stalled
// server or a network that drops packets does.
type proxy struct {
	ln   net.Listener
	gate sync.RWMutex // held by freeze: no byte passes
}

func newProxy(t *testing.T, to string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	px := &proxy{ln: ln}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, up)
			mu.Unlock()
			wg.Go(func() { px.pipe(up, c) })
			wg.Go(func() { px.pipe(c, up) })
		}
	})
	return px
}

// pipe copies from src to dst, holding what it read while frozen.
func (px *proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			px.gate.RLock()
			_, werr := dst.Write(buf[:n])
			px.gate.RUnlock()
			if werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (px *proxy) url() string { return "nats://" + px.ln.Addr().String() }
func (px *proxy) freeze()     { px.gate.Lock() }
func (px *proxy) thaw()       { px.gate.Unlock() }

// TestStalledLinkPauses freezes the link to the server under a running
// dispatcher, the connection still open: the publishes under way get no
// acknowledgement and count, and the dispatcher pauses (the stream in
// doubt, then the connection given up after its pings go unanswered).
// Rows stored once it is paused are not attempted, however long the link
// stays frozen; once it passes bytes again every row reaches the stream
// once.
func TestStalledLinkPauses(t *testing.T) {
	t.Parallel() // a server of its own
	s := runServer(t)
	addStream(t, s)
	px := newProxy(t, s.Addr().String())
	p, err := nats.Connect(px.url(), subject, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	if err := p.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	store := sqlitetest.MustOpen(t, sqlite.Options{})
	reg := dispatcher(t, store, p)
	before := putRows(t, store, "before", 10)
	waitFor(t, 10*time.Second, "rows published", func() bool {
		st, err := store.Stats(context.Background())
		return err == nil && st.ByStatus[inbox.StatusDone] == int64(len(before))
	})

	px.freeze()
	frozen := time.Now()
	cut := putRows(t, store, "cut", 4) // attempted into the frozen link
	waitFor(t, 15*time.Second, "paused", func() bool { return gathered(t, reg, "inbox_dispatch_paused") == 1 })
	t.Logf("paused %s after the link froze", time.Since(frozen))
	later := putRows(t, store, "later", 20)
	waitFor(t, 15*time.Second, "the connection given up, its pings unanswered", func() bool { return errors.Is(p.Ready(), nats.ErrUnreachable) })
	t.Logf("the connection given up %s after the link froze", time.Since(frozen))
	time.Sleep(time.Second)
	checkUnattempted(t, store, later)
	for _, id := range cut {
		if e, err := store.Get(context.Background(), id); err != nil || e.Status != inbox.StatusNew || e.Attempts < 1 {
			t.Errorf("%s, attempted into the frozen link: %s after %d attempts (%v); want new, attempted, not parked", id, e.Status, e.Attempts, err)
		}
	}
	px.thaw()
	thawed := time.Now()
	waitFor(t, 20*time.Second, "resumed", func() bool { return gathered(t, reg, "inbox_dispatch_paused") == 0 })
	t.Logf("resumed %s after the link passed bytes again", time.Since(thawed))
	checkOnce(t, store, s.ClientURL(), append(append(before, cut...), later...), cut...)
}

// TestMaxPayload: on a server whose max_payload is 4 KiB, a message that
// fits exactly, its headers with its body, is published; one byte more can
// never be, and its error parks the row at once (dispatch.Rejected),
// saying why, without sending it.
func TestMaxPayload(t *testing.T) {
	t.Parallel() // a server of its own
	s := natstest.Run(t, &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, MaxPayload: 4096,
		JetStream: true, StoreDir: filepath.Join(t.TempDir(), "js"), NoLog: true, NoSigs: true})
	st := addStream(t, s)
	p := connect(t, s)
	if got := p.MaxPayload(); got != 4096 {
		t.Fatalf("MaxPayload = %d, want the server's 4096", got)
	}
	job := func(id string, n int) inbox.Job {
		return inbox.Job{ID: id, Event: "job.completed", Body: []byte(strings.Repeat("x", n)), Attempt: 1}
	}
	// The headers Publish sets, as nats.go counts them.
	probe := natsgo.NewMsg(subject)
	for _, h := range []string{nats.HeaderEvent, nats.HeaderAttempt, nats.HeaderSource, nats.HeaderKey, nats.HeaderIdempotencyKey, nats.HeaderRowID, natsgo.MsgIdHdr} {
		probe.Header.Set(h, map[string]string{nats.HeaderEvent: "job.completed", nats.HeaderAttempt: "1", nats.HeaderSource: inbox.DefaultSource}[h])
	}
	for _, h := range []string{nats.HeaderKey, nats.HeaderIdempotencyKey, nats.HeaderRowID, natsgo.MsgIdHdr} {
		probe.Header.Set(h, "job_a")
	}
	room := 4096 - (probe.Size() - len(subject))
	if _, err := p.Publish(context.Background(), job("job_a", room)); err != nil {
		t.Fatalf("a message of exactly max_payload: %v", err)
	}
	_, err := p.Publish(context.Background(), job("job_b", room+1))
	switch {
	case err == nil:
		t.Fatal("a message one byte above max_payload was published")
	case !dispatch.Rejected(err) || !strings.Contains(err.Error(), "max_payload of 4096"):
		t.Errorf("one byte above max_payload: %v, want a rejection naming max_payload", err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Errorf("stream holds %d messages, want only the one that fit", info.State.Msgs)
	}
}

// TestStreamMaxMsgSize: a message above the stream's max_msg_size, though
// below the server's max_payload, can never be stored: its error parks the
// row at once (dispatch.Rejected); a smaller one is published.
func TestStreamMaxMsgSize(t *testing.T) {
	t.Parallel() // a server of its own
	s := runServer(t)
	nc, err := natsgo.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "JOBS", Subjects: []string{"sume.jobs.>"}, MaxMsgSize: 2048}); err != nil {
		t.Fatal(err)
	}
	p := connect(t, s)
	if _, err := p.Publish(context.Background(), inbox.Job{ID: "job_a", Body: body("job_a"), Attempt: 1}); err != nil {
		t.Fatalf("a small message: %v", err)
	}
	_, err = p.Publish(context.Background(), inbox.Job{ID: "job_b", Body: []byte(strings.Repeat("x", 4096)), Attempt: 1})
	if err == nil || !dispatch.Rejected(err) || !strings.Contains(err.Error(), "max_msg_size") {
		t.Errorf("above the stream's max_msg_size: %v, want a rejection naming max_msg_size", err)
	}
}
