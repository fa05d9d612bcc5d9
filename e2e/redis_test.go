package e2e

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"inbox/amqp/amqptest"
	"inbox/inbox"
	"inbox/metrics/metricstest"
	"inbox/redis"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

// redisDests writes a config of the sume source and the [[destination]]
// tables of a Redis stream and a BullMQ queue on url, each with extra,
// and returns its path.
func redisDests(t *testing.T, url, stream, queue, prefix string, extra string) string {
	t.Helper()
	text := fmt.Sprintf(`
[[source]]
name = "sume"
scheme = "sume"
[[source.secret]]
env = "SUME_COM_WEBHOOK_SIGNING_SECRET"

[[destination]]
name = "stream"
redis_url = %q
redis_stream = %q
%s

[[destination]]
name = "queue"
redis_url = %q
bullmq_queue = %q
bullmq_prefix = %q
%s
`, url, stream, extra, url, queue, prefix, extra)
	p := filepath.Join(t.TempDir(), "inbox.toml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// fillRedisDB stores n new rows in a fresh database and returns it with
// each row's body's sha256 by row id: job_0000 ..., and every 100th an
// integer id (100000, 100100, ...), which BullMQ refuses as a job id as it
// is.
func fillRedisDB(t *testing.T, n int) (string, map[string]string) {
	t.Helper()
	db := filepath.Join(t.TempDir(), "inbox.db")
	s := sqlitetest.MustOpenPath(t, db, sqlite.Options{})
	rules := inbox.Rules{Events: []string{"job.completed"}}
	sums := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprintf("job_%04d", i)
			if i%100 == 0 {
				id = fmt.Sprint(100000 + i)
			}
			body := fmt.Sprintf(`{"event":"job.completed","job_id":%q,"status":"COMPLETED","note":"caf\u00e9 <&> %d"}`, id, i)
			if _, err := s.Put(context.Background(), inbox.Classify("", inbox.Named{}, []byte(body), 1, rules)); err != nil {
				t.Error(err)
			}
			sum := sha256.Sum256([]byte(body))
			mu.Lock()
			sums[id] = hex.EncodeToString(sum[:])
			mu.Unlock()
		})
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return db, sums
}

// pairs reads each (row, destination) pair's status and attempts.
func pairs(t *testing.T, db string) map[string]map[string]rowAttempt {
	t.Helper()
	out := map[string]map[string]rowAttempt{}
	eachRow(t, db, `SELECT event_id, destination, status, attempts FROM deliveries`, func(rows *sql.Rows) error {
		var id, dest string
		var r rowAttempt
		err := rows.Scan(&id, &dest, &r.Status, &r.Attempts)
		if out[dest] == nil {
			out[dest] = map[string]rowAttempt{}
		}
		out[dest][id] = r
		return err
	})
	return out
}

// doneIn counts the pairs of dest done.
func doneIn(t *testing.T, db, dest string) int {
	n := 0
	for _, r := range pairs(t, db)[dest] {
		if r.Status == "done" {
			n++
		}
	}
	return n
}

// TestRedisBullMQFanOut hands 1,000 rows to a Redis stream, a BullMQ
// queue and a RabbitMQ queue through inbox dispatch, with a real BullMQ
// Worker taking the BullMQ queue, and kills the dispatcher with SIGKILL
// mid-way and starts it again: RabbitMQ's queue has every row (by
// message_id, a copy the kill caught in flight allowed); the
// stream holds every row, its body exact (a row the kill caught in flight
// may be there twice, as at least once allows); the queue has exactly one
// job per row, and the worker processed each once, integer row ids
// included, their job ids decoding to the row ids.
func TestRedisBullMQFanOut(t *testing.T) {
	t.Parallel()
	rdb := requireRedis(t, sharedRedis)
	stream := uniqueName(t, rdb, "inbox-e2e-stream-")
	queue := uniqueName(t, rdb, "inbox-e2e-queue-")
	const prefix = "inboxe2e"
	worker := startBullMQWorker(t, sharedRedis, queue, prefix)
	const n = 1000
	db, sums := fillRedisDB(t, n)
	cfg := redisDests(t, sharedRedis, stream, queue, prefix, "")
	rabbitURL := amqptest.URL(t)
	rabbit := newRabbitQueue(t, rabbitURL)
	rabbit.bind()
	appendTo(t, cfg, fmt.Sprintf("\n[[destination]]\nname = \"rabbit\"\namqp_url = %q\namqp_exchange = %q\namqp_routing_key = %q\n",
		rabbitURL, rabbit.exchange, rabbit.key))
	args := []string{"--db", db, "--config", cfg, "--workers", "8", "--timeout", "5s", "--lease", "10s"}

	d := startDispatch(t, args...)
	waitLong(t, 60*time.Second, "a quarter of the jobs processed", func() bool { return len(worker.processed(t)) >= n/4 })
	d.kill(syscall.SIGKILL)
	t.Logf("killed with %d jobs processed, %d stream pairs done", len(worker.processed(t)), doneIn(t, db, "stream"))
	d = startDispatch(t, args...)
	waitLong(t, 120*time.Second, "every pair done", func() bool {
		return doneIn(t, db, "stream") == n && doneIn(t, db, "queue") == n && doneIn(t, db, "rabbit") == n
	})
	waitLong(t, 60*time.Second, "every job processed", func() bool { return len(worker.processed(t)) >= n })
	ctx := context.Background()
	base := prefix + ":" + queue + ":"
	// Nothing is left to process: no later line can come.
	waitLong(t, 30*time.Second, "the queue drained", func() bool {
		return rdb.LLen(ctx, base+"wait").Val() == 0 && rdb.LLen(ctx, base+"active").Val() == 0
	})
	d.kill(syscall.SIGTERM)

	onRabbit := rabbit.drain()
	for id := range sums {
		if onRabbit[id] == 0 {
			t.Errorf("row %s never reached the RabbitMQ queue", id)
		}
	}
	if len(onRabbit) != n {
		t.Errorf("%d distinct message ids on the RabbitMQ queue, want %d", len(onRabbit), n)
	}

	seen := map[string]int{}
	for _, p := range worker.processed(t) {
		seen[p.RowID]++
		if p.DataRowID != p.RowID || p.Name != "job.completed" || p.BodySHA256 != sums[p.RowID] {
			t.Errorf("job %s: %+v; want the row id in its data, its event as its name, its body exact", p.ID, p)
		}
		if p.RowID == "100000" && p.ID != "%3100000" {
			t.Errorf("row 100000 is job %q, want %%3100000", p.ID)
		}
	}
	for id := range sums {
		if seen[id] != 1 {
			t.Errorf("row %s: processed %d times by the worker, want once", id, seen[id])
		}
	}
	if c := rdb.ZCard(ctx, base+"completed").Val(); c != n {
		t.Errorf("%d jobs completed, want %d", c, n)
	}

	entries, err := rdb.XRange(ctx, stream, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	inStream := map[string]int{}
	for _, e := range entries {
		id, _ := e.Values["row_id"].(string)
		body, _ := e.Values["body"].(string)
		sum := sha256.Sum256([]byte(body))
		if hex.EncodeToString(sum[:]) != sums[id] || e.Values["key"] != id || e.Values["source"] != "sume" || e.Values["event"] != "job.completed" {
			t.Errorf("stream entry %s: %v", e.ID, e.Values)
		}
		inStream[id]++
	}
	twice := 0
	for id := range sums {
		switch {
		case inStream[id] == 0:
			t.Errorf("row %s is not on the stream", id)
		case inStream[id] > 1:
			twice++
		}
	}
	t.Logf("%d stream entries for %d rows (%d rows twice: in flight at the kill)", len(entries), n, twice)
	// A dispatcher holds at most 16 rows a worker and 64 gone on beside
	// the workers: the most a kill can leave handed on and not recorded.
	if most := 16*8 + 64; twice > most {
		t.Errorf("%d rows on the stream twice: more than the %d the kill could leave handed on and unrecorded", twice, most)
	}
}

// TestRedisOutage runs serve with a Redis stream and a BullMQ queue on a
// Redis of the test's own, with a password, through an outage at start
// and one under load. While Redis is down, webhooks get 204, /readyz stays
// 200 and says each is unreachable, inbox_redis_connected is 0 and
// dispatch paused; the rows stored meanwhile get no attempt, and each is
// handed on at attempt 1 once it is back. After the outage under load
// the stream holds every row and the queue exactly one job each, none
// parked. The password is in no log line, metric, /readyz or
// /destinations.
func TestRedisOutage(t *testing.T) {
	t.Parallel()
	const password = "redis-pass-e2e-9f3k"
	r := newRedisServer(t, password)
	const stream, queue, prefix = "jobs", "jobs", "bull"
	cfg := redisDests(t, r.url(), stream, queue, prefix, `retry_schedule = "50ms,100ms"`)
	db := filepath.Join(t.TempDir(), "inbox.db")
	srv := startServer(t, db, "--admin-addr", "127.0.0.1:0", "--config", cfg, "--timeout", "2s", "--lease", "10s")
	metric := func(name string) float64 { return metricstest.Scrape(t, srv.admin+"/metrics")[name] }
	paused := func(dest string) float64 { return metric(`inbox_dispatch_paused{destination="` + dest + `"}`) }
	connected := func(dest string) float64 { return metric(`inbox_redis_connected{destination="` + dest + `"}`) }
	deliver := func(prefix string, n int) []string {
		var ids []string
		for i := range n {
			id := fmt.Sprintf("%s_%03d", prefix, i)
			if got := send(t, http.DefaultClient, srv.url, fmt.Sprintf(`{"event":"job.completed","job_id":%q,"status":"COMPLETED"}`, id), e2eSecret); got != http.StatusNoContent {
				t.Fatalf("delivery %s: %d\n%s", id, got, srv.logs)
			}
			ids = append(ids, id)
		}
		return ids
	}
	allDone := func(n int) func() bool {
		return func() bool { return doneIn(t, db, "stream") == n && doneIn(t, db, "queue") == n }
	}

	// 1. Down at start.
	if code, body := get(t, srv.admin+"/readyz"); code != http.StatusOK || !strings.Contains(body, "redis stream: unreachable: dispatch paused") || !strings.Contains(body, "bullmq queue: unreachable: dispatch paused") {
		t.Errorf("readyz with redis down: %d %q", code, body)
	}
	waitLong(t, 10*time.Second, "both paused", func() bool { return paused("stream") == 1 && paused("queue") == 1 })
	if connected("stream") != 0 || connected("queue") != 0 {
		t.Errorf("inbox_redis_connected is not 0 with redis down")
	}
	atStart := deliver("start", 10)
	time.Sleep(1500 * time.Millisecond) // ten times the retry schedule
	for dest, rows := range pairs(t, db) {
		for id, p := range rows {
			if p.Status != "new" || p.Attempts != 0 {
				t.Errorf("%s to %s with redis down: %s, %d attempts; want new, none", id, dest, p.Status, p.Attempts)
			}
		}
	}
	r.start()
	waitLong(t, 30*time.Second, "the rows handed on once redis is up", allDone(len(atStart)))
	for dest, rows := range pairs(t, db) {
		for id, p := range rows {
			if p.Attempts != 1 {
				t.Errorf("%s to %s: done at attempt %d, want 1", id, dest, p.Attempts)
			}
		}
	}
	if code, body := get(t, srv.admin+"/readyz"); code != http.StatusOK || !strings.Contains(body, "redis stream: connected, stream jobs") || !strings.Contains(body, "bullmq queue: connected, queue bull:jobs") {
		t.Errorf("readyz with redis up: %d %q", code, body)
	}
	if connected("stream") != 1 || connected("queue") != 1 || paused("stream") != 0 {
		t.Errorf("with redis up: connected %v %v, paused %v", connected("stream"), connected("queue"), paused("stream"))
	}

	// 2. Down under load: killed, and started again on its append-only file.
	l := &load{}
	loadDone := l.pace(t, srv.url, 80, 20*time.Millisecond)
	time.Sleep(400 * time.Millisecond)
	r.kill()
	waitLong(t, 10*time.Second, "paused", func() bool { return paused("stream") == 1 && paused("queue") == 1 })
	from := len(l.sent())
	time.Sleep(1500 * time.Millisecond)
	to := len(l.sent()) // the rows from..to were stored while Redis was down and dispatch paused
	r.start()
	loaded := loadDone()
	total := len(atStart) + len(loaded)
	waitLong(t, 60*time.Second, "every row handed on", allDone(total))

	rdb := r.client()
	ctx := context.Background()
	inStream := map[string]int{}
	for _, e := range rdb.XRange(ctx, stream, "-", "+").Val() {
		inStream[e.Values["row_id"].(string)]++
	}
	waiting := map[string]int{}
	for _, id := range rdb.LRange(ctx, prefix+":"+queue+":wait", 0, -1).Val() {
		waiting[id]++
	}
	retried := 0
	for dest, rows := range pairs(t, db) {
		for id, p := range rows {
			if p.Status != "done" {
				t.Errorf("%s to %s: %s, want done", id, dest, p.Status)
			}
			if p.Attempts > 1 {
				retried++
			}
		}
	}
	done := pairs(t, db)
	for _, id := range loaded[from:to] {
		for dest, rows := range done {
			if p := rows[id]; p.Attempts != 1 {
				t.Errorf("%s, stored while redis was down, to %s: done at attempt %d, want 1", id, dest, p.Attempts)
			}
		}
	}
	if to-from < 10 {
		t.Errorf("only %d rows stored while redis was down", to-from)
	}
	for _, id := range append(atStart, loaded...) {
		if inStream[id] == 0 {
			t.Errorf("%s is not on the stream", id)
		}
		if waiting[id] != 1 {
			t.Errorf("%s is in the queue's wait list %d times, want once", id, waiting[id])
		}
		if rdb.Exists(ctx, prefix+":"+queue+":"+redis.JobID(id)).Val() != 1 {
			t.Errorf("%s has no job", id)
		}
	}
	t.Logf("%d rows, %d pairs retried (in flight at the kill), %d stream entries", total, retried, len(rdb.XRange(ctx, stream, "-", "+").Val()))

	_, dests := get(t, srv.admin+"/destinations")
	_, ready := get(t, srv.admin+"/readyz")
	_, metrics := get(t, srv.admin+"/metrics")
	for what, text := range map[string]string{"the log": srv.logs.String(), "/destinations": dests, "/readyz": ready, "/metrics": metrics} {
		if strings.Contains(text, password) {
			t.Errorf("%s holds the redis password", what)
		}
	}
	if !strings.Contains(dests, `"kind":"redis"`) || !strings.Contains(dests, `"kind":"bullmq"`) {
		t.Errorf("/destinations: %s", dests)
	}
}

// appendTo appends text to the file at path.
func appendTo(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
