package nats_test

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"inbox/dispatch"
	"inbox/inbox"
	"inbox/inbox/inboxtest"
	"inbox/nats"
)

const subject = "sume.jobs.terminal"

// runServer starts an embedded nats-server with JetStream on a random port,
// stored in a temporary folder, for the test's length.
func runServer(t *testing.T) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT,
		JetStream: true, StoreDir: filepath.Join(t.TempDir(), "js"),
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
	p, err := nats.Connect(context.Background(), s.ClientURL(), subject)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func body(id string) []byte {
	return []byte(fmt.Sprintf(`{"event":"job.completed","job_id":%q,"status":"COMPLETED"}`, id))
}

// TestConnectChecksStream: with no stream over the subject, Connect says
// so; with one, it finds it.
func TestConnectChecksStream(t *testing.T) {
	s := runServer(t)
	_, err := nats.Connect(context.Background(), s.ClientURL(), subject)
	if err == nil || !strings.Contains(err.Error(), `no JetStream stream covers subject "sume.jobs.terminal"`) {
		t.Fatalf("no stream: err = %v", err)
	}
	addStream(t, s)
	if p := connect(t, s); p.Stream() != "JOBS" {
		t.Errorf("stream = %q, want JOBS", p.Stream())
	}
	for _, bad := range []string{"", "sume.jobs.>", "sume.*.x", "a b"} {
		if _, err := nats.Connect(context.Background(), s.ClientURL(), bad); err == nil {
			t.Errorf("subject %q accepted", bad)
		}
	}
	if _, err := nats.Connect(context.Background(), "nats://127.0.0.1:1", subject); err == nil {
		t.Error("connected to nothing")
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
	_, err = nats.Connect(context.Background(), s.ClientURL(), subject)
	if err == nil || !strings.Contains(err.Error(), "JetStream is not enabled") {
		t.Errorf("err = %v", err)
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
	store := inboxtest.MustOpen(t, inbox.Options{})
	rules := inbox.Rules{Events: []string{"job.completed"}}
	const n = 200
	for i := range n {
		if _, err := store.Put(context.Background(), inbox.Classify(body(fmt.Sprintf("job_%03d", i)), 1, rules)); err != nil {
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
