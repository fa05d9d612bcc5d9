package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"inbox/amqp/amqptest"
	"inbox/metrics/metricstest"
)

// rabbitQueue is a durable exchange and a durable queue bound to it with
// key, named for the test alone and deleted after it.
type rabbitQueue struct {
	t                    *testing.T
	exchange, queue, key string
	ch                   *amqp091.Channel
}

func newRabbitQueue(t *testing.T, u string) *rabbitQueue {
	t.Helper()
	name, ch := amqptest.Declare(t, u, nil)
	return &rabbitQueue{t: t, exchange: name, queue: name, key: "sume.jobs", ch: ch}
}

func (q *rabbitQueue) bind() {
	q.t.Helper()
	if err := q.ch.QueueBind(q.queue, q.key, q.exchange, false, nil); err != nil {
		q.t.Fatal(err)
	}
}

// depth is how many messages the queue holds.
func (q *rabbitQueue) depth() int {
	q.t.Helper()
	st, err := q.ch.QueueDeclarePassive(q.queue, true, false, false, false, nil)
	if err != nil {
		q.t.Fatal(err)
	}
	return st.Messages
}

// drain takes every message off the queue and returns how many times each
// message_id came. It checks what lets a consumer dedupe by message_id:
// every copy of one carries the same body, naming the job, and its row id
// in Inbox-Row-Id.
func (q *rabbitQueue) drain() map[string]int {
	q.t.Helper()
	got, bodies := map[string]int{}, map[string]string{}
	for {
		d, ok, err := q.ch.Get(q.queue, true)
		if err != nil {
			q.t.Fatal(err)
		}
		if !ok {
			return got
		}
		id := d.MessageId
		got[id]++
		if prev, seen := bodies[id]; seen && prev != string(d.Body) {
			q.t.Errorf("%s: two copies with different bodies: %q and %q", id, prev, d.Body)
		}
		bodies[id] = string(d.Body)
		if !strings.Contains(string(d.Body), fmt.Sprintf("%q", id)) || d.Headers["Inbox-Row-Id"] != id || d.DeliveryMode != amqp091.Persistent {
			q.t.Errorf("%s: body %q, headers %v, delivery mode %d", id, d.Body, d.Headers, d.DeliveryMode)
		}
	}
}

// rabbitConfig is a configuration file with one [[destination]] named
// rabbit publishing to q through brokerURL, at most rate a second.
func rabbitConfig(t *testing.T, q *rabbitQueue, brokerURL, rate string) string {
	return writeConfig(t, t.TempDir(), fmt.Sprintf(`[[destination]]
name = "rabbit"
amqp_url = %q
amqp_exchange = %q
amqp_routing_key = %q
rate = %q
`, brokerURL, q.exchange, q.key, rate))
}

// checkEveryJob fails unless got holds job_0000 ... job_<n-1>, and nothing
// else, and returns how many copies beyond one it holds.
func checkEveryJob(t *testing.T, got map[string]int, n int) (again int) {
	t.Helper()
	for i := range n {
		id := fmt.Sprintf("job_%04d", i)
		if got[id] == 0 {
			t.Errorf("%s never reached the queue", id)
		}
		again += max(got[id]-1, 0)
	}
	if len(got) != n {
		t.Errorf("%d distinct message ids on the queue, want %d", len(got), n)
	}
	return again
}

// pairsDone waits until every row's pair with rabbit is done, failing if
// one is parked.
func pairsDone(t *testing.T, db string, n int, logs fmt.Stringer) {
	t.Helper()
	waitLong(t, 60*time.Second, "every row handed to RabbitMQ", func() bool {
		done := 0
		for k, p := range pairStates(t, db) {
			if p.Status == "parked" {
				t.Fatalf("%s parked\n%s", k, logs)
			}
			if p.Status == "done" {
				done++
			}
		}
		return done == n
	})
}

// TestDispatchRabbitMQCrash hands 600 rows to a durable RabbitMQ queue
// through inbox dispatch, kills it with SIGKILL mid-way and starts it
// again: every row reaches the queue, the ones published but not yet
// recorded at the kill twice at most, and each copy carries the row's id
// as message_id, so a consumer dedupes.
func TestDispatchRabbitMQCrash(t *testing.T) {
	t.Parallel()
	const n = 600
	u := amqptest.URL(t)
	q := newRabbitQueue(t, u)
	q.bind()
	db := fillDB(t, n)
	args := []string{"dispatch", "--db", db, "--config", rabbitConfig(t, q, u, "500/s"), "--admin-addr", "127.0.0.1:0",
		"--workers", "4", "--timeout", "2s", "--lease", "4s"}
	d := startInbox(t, nil, args...)
	waitLong(t, 30*time.Second, "a quarter of the rows on the queue", func() bool { return q.depth() >= n/4 })
	if code, body := get(t, d.admin+"/readyz"); code != http.StatusOK || !strings.Contains(body, "amqp rabbit: connected, exchange "+q.exchange) {
		t.Errorf("readyz: %d %q", code, body)
	}
	if g := metricstest.Scrape(t, d.admin+"/metrics")[`inbox_amqp_connected{destination="rabbit"}`]; g != 1 {
		t.Errorf(`inbox_amqp_connected{destination="rabbit"} = %v, want 1`, g)
	}
	out, _, code := runCLI(t, nil, "destinations", "--admin", d.admin, "--json")
	if code != 0 || !strings.Contains(out, `"name":"rabbit"`) || !strings.Contains(out, `"kind":"amqp"`) || strings.Contains(out, "guest") {
		t.Errorf("destinations: exit %d\n%s", code, out)
	}
	d.signal(syscall.SIGKILL)
	<-d.done
	done := 0
	for _, p := range pairStates(t, db) {
		if p.Status == "done" {
			done++
		}
	}
	t.Logf("killed with %d of %d rows done, %d messages on the queue", done, n, q.depth())
	if done == n {
		t.Fatal("every row was done before the kill: the test proved nothing")
	}

	d = startInbox(t, nil, args...)
	pairsDone(t, db, n, d.logs)
	d.signal(syscall.SIGTERM)
	<-d.done
	again := checkEveryJob(t, q.drain(), n)
	t.Logf("%d rows, %d published again after the kill (at least once; message_id dedupes)", n, again)
	if strings.Contains(d.logs.String(), "guest:guest") {
		t.Error("the log holds the broker's password")
	}
}

// TestDispatchRabbitMQOutage cuts the connection to RabbitMQ (a proxy in
// between, closed; the shared broker keeps running) while inbox dispatch
// hands rows on: it pauses, /readyz says the broker is unreachable, and
// no attempt is spent while it is away; once the proxy relays again it
// reconnects by itself and every row reaches the queue, none parked.
func TestDispatchRabbitMQOutage(t *testing.T) {
	t.Parallel()
	const n = 600
	u := amqptest.URL(t)
	q := newRabbitQueue(t, u)
	q.bind()
	px := amqptest.NewProxy(t, u)
	db := fillDB(t, n)
	d := startInbox(t, nil, "dispatch", "--db", db, "--config", rabbitConfig(t, q, px.Through(u), "200/s"), "--admin-addr", "127.0.0.1:0",
		"--workers", "4", "--retry-schedule", "50ms,100ms", "--timeout", "2s", "--lease", "4s")
	gauge := func(name string) float64 { return metricstest.Scrape(t, d.admin+"/metrics")[name] }
	waitLong(t, 30*time.Second, "rows on the queue", func() bool { return q.depth() >= n/6 })
	px.Down()
	waitLong(t, 20*time.Second, "paused", func() bool { return gauge(`inbox_dispatch_paused{destination="rabbit"}`) == 1 })
	if g := gauge(`inbox_amqp_connected{destination="rabbit"}`); g != 0 {
		t.Errorf("inbox_amqp_connected = %v while cut, want 0", g)
	}
	if code, body := get(t, d.admin+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "amqp rabbit: unreachable: dispatch paused") {
		t.Errorf("readyz while cut: %d %q", code, body)
	}
	before := pairStates(t, db)
	time.Sleep(1500 * time.Millisecond) // ten times the retry schedule
	for k, p := range pairStates(t, db) {
		if b := before[k]; p.Attempts > b.Attempts || p.Status == "parked" {
			t.Errorf("%s while cut: %s, %d attempts; %s, %d before", k, p.Status, p.Attempts, b.Status, b.Attempts)
		}
	}
	px.Up()
	pairsDone(t, db, n, d.logs)
	retried := 0
	for _, p := range pairStates(t, db) {
		if p.Attempts > 1 {
			retried++
		}
	}
	d.signal(syscall.SIGTERM)
	<-d.done
	again := checkEveryJob(t, q.drain(), n)
	t.Logf("%d rows, %d retried (under way at the cut), %d published twice", n, retried, again)
	if !strings.Contains(d.logs.String(), "rabbitmq disconnected") || !strings.Contains(d.logs.String(), "rabbitmq connected") {
		t.Errorf("the log does not say the broker went and came back:\n%s", d.logs)
	}
}

// TestDispatchRabbitMQUnroutable: a queue not bound yet (an operator's
// mistake) makes every publish come back unroutable: the destination is
// down, its rows wait unparked, inbox stats says so with the reason, and
// once the queue is bound every row reaches it.
func TestDispatchRabbitMQUnroutable(t *testing.T) {
	t.Parallel()
	const n = 20
	u := amqptest.URL(t)
	q := newRabbitQueue(t, u)
	db := fillDB(t, n)
	d := startInbox(t, nil, "dispatch", "--db", db, "--config", rabbitConfig(t, q, u, "100/s"), "--admin-addr", "127.0.0.1:0",
		"--workers", "2", "--retry-schedule", "50ms", "--timeout", "2s", "--lease", "4s")
	waitLong(t, 20*time.Second, "down", func() bool {
		return metricstest.Scrape(t, d.admin+"/metrics")[`inbox_dispatch_destination_down{destination="rabbit"}`] == 1
	})
	out, _, _ := runCLI(t, nil, "stats", "--db", db)
	if !strings.Contains(out, "down for") {
		t.Errorf("stats does not show rabbit down:\n%s", out)
	}
	out, _, _ = runCLI(t, nil, "stats", "--db", db, "--json")
	var st struct {
		Destinations []struct {
			Name, State string
			DownCause   string `json:"down_cause"`
		}
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || len(st.Destinations) != 1 ||
		st.Destinations[0].State != "down" || !strings.Contains(st.Destinations[0].DownCause, "returned unroutable by the broker (312 NO_ROUTE)") {
		t.Errorf("stats --json: %v %+v\n%s", err, st, out)
	}
	if !strings.Contains(d.logs.String(), "returned unroutable by the broker") {
		t.Errorf("the log does not say why:\n%s", d.logs)
	}
	time.Sleep(time.Second) // ten times the retry schedule
	for k, p := range pairStates(t, db) {
		if p.Status != "new" {
			t.Errorf("%s while unroutable: %s, want new", k, p.Status)
		}
	}
	q.bind()
	pairsDone(t, db, n, d.logs)
	d.signal(syscall.SIGTERM)
	<-d.done
	checkEveryJob(t, q.drain(), n)
}
