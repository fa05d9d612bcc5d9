package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"inbox/metrics/metricstest"
	"inbox/testport"
)

const natsSubject = "sume.jobs.terminal"

// broker is an embedded nats-server with JetStream on a fixed port of the
// test's choosing and a store folder, so it can be stopped and brought
// back as the same server, streams and all.
type broker struct {
	t    *testing.T
	port int
	dir  string
	s    *natsserver.Server
}

// newBroker picks a free port for a broker that is not started yet.
func newBroker(t *testing.T) *broker {
	b := &broker{t: t, port: testport.Later(t), dir: filepath.Join(t.TempDir(), "js")}
	t.Cleanup(b.stop)
	return b
}

func (b *broker) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", b.port) }

func (b *broker) start() {
	b.t.Helper()
	s, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: b.port, JetStream: true, StoreDir: b.dir, NoLog: true, NoSigs: true})
	if err != nil {
		b.t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		b.t.Fatal("nats-server did not start")
	}
	b.s = s
}

func (b *broker) stop() {
	if b.s != nil {
		b.s.Shutdown()
		b.s.WaitForShutdown()
		b.s = nil
	}
}

// stream returns the stream JOBS over sume.jobs.>, creating it the first
// time; the connection is closed when the test ends.
func (b *broker) stream() jetstream.Stream { return b.streamOf("JOBS", "sume.jobs.>") }

// streamOf returns the stream name over subjects, creating it the first
// time; the connection is closed when the test ends.
func (b *broker) streamOf(name, subjects string) jetstream.Stream {
	return b.streamWith(jetstream.StreamConfig{Name: name, Subjects: []string{subjects}})
}

// streamWith creates or updates the stream cfg describes, with a
// duplicate window of 2 minutes; the connection is closed when the test
// ends.
func (b *broker) streamWith(cfg jetstream.StreamConfig) jetstream.Stream {
	b.t.Helper()
	nc, err := natsgo.Connect(b.url())
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		b.t.Fatal(err)
	}
	cfg.Duplicates = 2 * time.Minute
	st, err := js.CreateOrUpdateStream(context.Background(), cfg)
	if err != nil {
		b.t.Fatal(err)
	}
	return st
}

// messages returns the Inbox-Attempt of every message on the stream, per
// Nats-Msg-Id.
func (b *broker) messages() map[string][]string {
	b.t.Helper()
	st := b.stream()
	ctx := context.Background()
	info, err := st.Info(ctx)
	if err != nil {
		b.t.Fatal(err)
	}
	out := map[string][]string{}
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		msg, err := st.GetMsg(ctx, seq)
		if err != nil {
			b.t.Fatal(err)
		}
		id := msg.Header.Get(natsgo.MsgIdHdr)
		out[id] = append(out[id], msg.Header.Get("Inbox-Attempt"))
	}
	return out
}

// waitLong is waitFor with a bound of its own, for what waits on a
// reconnection or a retry.
func waitLong(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// natsRetries is a short retry schedule: a broker outage in these tests
// lasts ten times as long as the whole of it, and must park no row.
const natsRetries = "50ms,100ms"

// natsOutage is how long a test's broker stays down: ten times the whole
// of natsRetries.
const natsOutage = 1500 * time.Millisecond

// TestServeNATSOutage runs serve with a JetStream destination through a
// broker outage at start and two more: serve starts while the broker is
// down and answers 204 (readyz ok, saying the broker is unreachable and
// dispatch paused; inbox_nats_connected 0, inbox_dispatch_paused 1). The
// rows stored while it is down, for ten times the whole retry schedule,
// stay new with no attempt counted, and are published once, at their first
// attempt, once it is up. It goes down between deliveries, the same again,
// and then in the middle of a load: deliveries still get 204, and once it
// is back every row is done, none parked, and on the stream exactly once.
// For the rows stored while it was down, that one message is the attempt
// the row says succeeded: nothing counted failed reached the stream later.
func TestServeNATSOutage(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	db := filepath.Join(t.TempDir(), "inbox.db")
	srv := startServer(t, db, "--admin-addr", "127.0.0.1:0", "--nats-url", b.url(), "--nats-subject", natsSubject,
		"--retry-schedule", natsRetries, "--timeout", "2s", "--lease", "10s")
	gauge := func(name string) float64 { return metricstest.Scrape(t, srv.admin+"/metrics")[name] }
	connected := func() float64 { return gauge("inbox_nats_connected") }
	paused := func() float64 { return gauge(`inbox_dispatch_paused{destination="default"}`) }
	if code, body := get(t, srv.admin+"/readyz"); code != http.StatusOK || !strings.HasPrefix(body, "ok\n") || !strings.Contains(body, "nats: unreachable: dispatch paused") {
		t.Errorf("readyz with the broker down: %d %q; want 200 ok, saying nats is unreachable and dispatch paused", code, body)
	}
	if g := connected(); g != 0 {
		t.Errorf("inbox_nats_connected = %v with the broker down, want 0", g)
	}
	waitLong(t, 10*time.Second, "inbox_dispatch_paused 1", func() bool { return paused() == 1 })
	deliver := func(prefix string, n int) []string {
		var ids []string
		for i := range n {
			id := fmt.Sprintf("%s_%03d", prefix, i)
			if got := send(t, http.DefaultClient, srv.url, fmt.Sprintf(`{"event":"job.completed","job_id":%q,"status":"COMPLETED"}`, id), e2eSecret); got != http.StatusNoContent {
				t.Fatalf("delivery %s with the broker down: %d\n%s", id, got, srv.logs)
			}
			ids = append(ids, id)
		}
		return ids
	}
	unattempted := func(ids []string) {
		t.Helper()
		rows := rowAttempts(t, db)
		for _, id := range ids {
			if r := rows[id]; r.Status != "new" || r.Attempts != 0 {
				t.Errorf("%s after %s with the broker down: %s, %d attempts; want new, none", id, natsOutage, r.Status, r.Attempts)
			}
		}
		if g := paused(); g != 1 {
			t.Errorf("inbox_dispatch_paused = %v with the broker down, want 1", g)
		}
	}
	allDone := func(n int) func() bool {
		return func() bool { states, _ := rowStates(t, db); return states["done"] == n }
	}

	// 1. Down at start.
	atStart := deliver("start", 10)
	time.Sleep(natsOutage)
	unattempted(atStart)
	up := time.Now()
	b.start()
	b.stream()
	waitLong(t, 30*time.Second, "the rows published once the broker is up", allDone(len(atStart)))
	t.Logf("down at start: every row done %s after the broker started", time.Since(up))
	if code, body := get(t, srv.admin+"/readyz"); code != http.StatusOK || !strings.Contains(body, "nats: connected, stream JOBS") {
		t.Errorf("readyz with the broker up: %d %q", code, body)
	}
	if g := connected(); g != 1 {
		t.Errorf("inbox_nats_connected = %v with the broker up, want 1", g)
	}
	if g := paused(); g != 0 {
		t.Errorf("inbox_dispatch_paused = %v with the broker up, want 0", g)
	}

	// 2. Down between deliveries.
	b.stop()
	waitLong(t, 10*time.Second, "inbox_nats_connected 0", func() bool { return connected() == 0 })
	waitLong(t, 10*time.Second, "inbox_dispatch_paused 1", func() bool { return paused() == 1 })
	between := deliver("between", 10)
	time.Sleep(natsOutage)
	unattempted(between)
	up = time.Now()
	b.start()
	waitLong(t, 30*time.Second, "the rows published once the broker is back", allDone(len(atStart)+len(between)))
	t.Logf("down between deliveries: every row done %s after the broker started again", time.Since(up))

	// 3. Down under load: the publishes under way at the cut may or may not
	// have reached the stream.
	loadDone := (&load{}).pace(t, srv.url, 60, 20*time.Millisecond)
	time.Sleep(400 * time.Millisecond)
	b.stop()
	time.Sleep(natsOutage)
	b.start()
	loaded := loadDone()
	total := len(atStart) + len(between) + len(loaded)
	waitLong(t, 30*time.Second, "every row done", allDone(total))

	rows := rowAttempts(t, db)
	msgs := b.messages()
	failedOnStream, retried := 0, 0
	for _, id := range append(append(atStart, between...), loaded...) {
		r, got := rows[id], msgs[id]
		if r.Attempts > 1 {
			retried++
		}
		if !strings.HasPrefix(id, "load_") && r.Attempts != 1 {
			t.Errorf("%s: done at attempt %d, want 1: nothing is attempted while the broker is down", id, r.Attempts)
		}
		if len(got) != 1 {
			t.Errorf("%s: %d messages on the stream (attempts %v), want one: the duplicate window covers the test", id, len(got), got)
			continue
		}
		n, _ := strconv.Atoi(got[0])
		if n < 1 || n > r.Attempts {
			t.Errorf("%s: the message is attempt %s, the row made %d", id, got[0], r.Attempts)
		}
		if n != r.Attempts {
			failedOnStream++
			if !strings.HasPrefix(id, "load_") {
				t.Errorf("%s: the message on the stream is attempt %d, counted failed; the row succeeded at attempt %d", id, n, r.Attempts)
			}
		}
	}
	t.Logf("%d rows, %d retried, %d on the stream from an attempt counted failed (an ack lost at the cut)", total, retried, failedOnStream)
	if len(msgs) != total {
		t.Errorf("%d job ids on the stream, want %d", len(msgs), total)
	}
	if strings.Contains(srv.logs.String(), e2eSecret) {
		t.Error("the log holds the secret")
	}
}

// dispatchAdmin waits for inbox dispatch to listen on --admin-addr and
// returns its base URL.
func dispatchAdmin(t *testing.T, d *dispatcher) string {
	t.Helper()
	var admin string
	waitLong(t, 20*time.Second, "dispatch listening", func() bool {
		for _, line := range strings.Split(d.logs.String(), "\n") {
			var m struct{ Message, Addr, Serves string }
			if json.Unmarshal([]byte(line), &m) == nil && m.Message == "listening" && m.Serves == "admin" {
				admin = "http://" + m.Addr
			}
		}
		return admin != ""
	})
	return admin
}

// TestDispatchNATSOutage runs inbox dispatch with the broker down: it
// starts, its readyz fails saying the broker is unreachable (handing on is
// all it does), then says no stream answers once the broker is up without
// one, and is ready once the stream exists; the rows are then published.
// Started against a broker that answers with no stream, dispatch stops at
// once naming the subject; serve starts regardless.
func TestDispatchNATSOutage(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	db := fillDB(t, 3)
	d := startDispatch(t, "--db", db, "--nats-url", b.url(), "--nats-subject", natsSubject, "--admin-addr", "127.0.0.1:0",
		"--retry-schedule", natsRetries, "--timeout", "2s", "--lease", "10s")
	admin := dispatchAdmin(t, d)
	if code, body := get(t, admin+"/readyz"); code != http.StatusServiceUnavailable || body != "not ready\nnats: unreachable: dispatch paused, rows wait with no attempt counted\ndestination default: unreachable: paused\n" {
		t.Errorf("readyz with the broker down: %d %q, want 503 saying nats is unreachable", code, body)
	}
	if g := metricstest.Scrape(t, admin+"/metrics")["inbox_nats_connected"]; g != 0 {
		t.Errorf("inbox_nats_connected = %v, want 0", g)
	}
	b.start()
	waitLong(t, 15*time.Second, "connected", func() bool { return metricstest.Scrape(t, admin+"/metrics")["inbox_nats_connected"] == 1 })
	if code, body := get(t, admin+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "no JetStream stream answers for subject "+natsSubject) {
		t.Errorf("readyz with no stream: %d %q", code, body)
	}
	b.stream()
	waitLong(t, 10*time.Second, "ready", func() bool { code, _ := get(t, admin+"/readyz"); return code == http.StatusOK })
	waitLong(t, 30*time.Second, "rows done", func() bool { states, _ := rowStates(t, db); return states["done"] == 3 })
	d.kill(syscall.SIGTERM)
	if code := d.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit %d after SIGTERM\n%s", code, d.logs)
	}

	// A broker up with no stream over the subject.
	bare := newBroker(t)
	bare.start()
	_, errOut, code := runCLI(t, nil, "dispatch", "--db", db, "--nats-url", bare.url(), "--nats-subject", natsSubject)
	if code != 1 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, `no JetStream stream covers subject "sume.jobs.terminal"`) {
		t.Errorf("dispatch, no stream: exit %d, stderr %q", code, errOut)
	}
	srv := startServer(t, filepath.Join(t.TempDir(), "inbox.db"), "--nats-url", bare.url(), "--nats-subject", natsSubject)
	if got := send(t, http.DefaultClient, srv.url, `{"event":"job.completed","job_id":"job_1","status":"COMPLETED"}`, e2eSecret); got != http.StatusNoContent {
		t.Errorf("serve with no stream: delivery %d\n%s", got, srv.logs)
	}
	if !strings.Contains(srv.logs.String(), "no JetStream stream covers subject") {
		t.Errorf("serve did not log the missing stream:\n%s", srv.logs)
	}
}
