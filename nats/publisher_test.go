package nats_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"inbox/dispatch"
	"inbox/inbox"
	"inbox/nats"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
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
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: port,
		JetStream: true, StoreDir: dir,
		NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

// freePort returns a port nothing listens on now, for a server started
// later.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
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

// TestOutageNoLateMessages runs the dispatcher into the stream, takes the
// server down between deliveries, stores rows while it is down (each fails
// several attempts, retried on the schedule), and brings it back on the
// same port and store. Every row ends done, on the stream exactly once, and
// that message is the attempt the row says succeeded: no attempt counted
// failed reached the stream later (nats.go's reconnect buffer would send
// them on reconnection).
func TestOutageNoLateMessages(t *testing.T) {
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
	attempts := func(id string) int64 {
		e, err := store.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return e.Attempts
	}
	done := func() int {
		st, err := store.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return int(st.ByStatus[inbox.StatusDone])
	}
	schedule := make([]time.Duration, 200) // 20s of retries: no row parks
	for i := range schedule {
		schedule[i] = 100 * time.Millisecond
	}
	d, err := dispatch.New(store, dispatch.Config{Destination: p, Workers: 4, Poll: 5 * time.Millisecond,
		Lease: 10 * time.Second, Timeout: time.Second, Schedule: schedule}, zerolog.New(io.Discard))
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
	s.Shutdown()
	s.WaitForShutdown()
	waitFor(t, 5*time.Second, "disconnected", func() bool { ok, _ := p.State(context.Background()); return !ok })
	during := put("down", 30)
	waitFor(t, 20*time.Second, "two failed attempts per row", func() bool {
		for _, id := range during {
			if attempts(id) < 2 {
				return false
			}
		}
		return true
	})
	failed := 0
	for _, id := range during {
		failed += int(attempts(id))
	}
	t.Logf("%d attempts failed while the server was down", failed)
	runServerAt(t, port, dir)
	all := append(before, during...)
	waitFor(t, 30*time.Second, "every row done after the server came back", func() bool { return done() == len(all) })

	msgs := streamMessages(t, url)
	late := 0
	for _, id := range all {
		want := strconv.FormatInt(attempts(id), 10)
		if got := msgs[id]; len(got) != 1 || got[0] != want {
			late++
			t.Errorf("%s: messages with attempts %v on the stream, want one, of attempt %s (the row's)", id, got, want)
		}
	}
	if len(msgs) != len(all) {
		t.Errorf("%d job ids on the stream, want %d", len(msgs), len(all))
	}
	t.Logf("%d rows, %d with a message from an attempt counted failed", len(all), late)
}
