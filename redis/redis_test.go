package redis_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"inbox/dispatch"
	"inbox/inbox"
	"inbox/redis"
)

// testURL is the Redis the tests use: INBOX_TEST_REDIS_URL, else the
// project's machines' own, database 11 (the tests' keys are unique to
// each test, and deleted after).
func testURL() string {
	if u := os.Getenv("INBOX_TEST_REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/11"
}

// mustRedis returns a client to testURL, skipping the test when Redis
// does not answer, or failing it with INBOX_REQUIRE_REDIS=1 (as CI sets).
func mustRedis(t *testing.T) *goredis.Client {
	t.Helper()
	opts, err := goredis.ParseURL(testURL())
	if err != nil {
		t.Fatal(err)
	}
	rdb := goredis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		if os.Getenv("INBOX_REQUIRE_REDIS") != "" {
			t.Fatalf("redis at %s: %v (INBOX_REQUIRE_REDIS is set)", testURL(), err)
		}
		t.Skipf("no redis at %s: %v", testURL(), err)
	}
	return rdb
}

// unique is a name no other test run uses; its keys are deleted after.
func unique(t *testing.T, rdb *goredis.Client, prefix string) string {
	b := make([]byte, 6)
	rand.Read(b)
	name := prefix + "-" + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx := context.Background()
		for _, pattern := range []string{name, name + ":*", "*:" + name + ":*"} {
			keys, _ := rdb.Keys(ctx, pattern).Result()
			if len(keys) > 0 {
				rdb.Del(ctx, keys...)
			}
		}
	})
	return name
}

func TestStreamDeliver(t *testing.T) {
	rdb := mustRedis(t)
	name := unique(t, rdb, "inbox-test-stream")
	s, err := redis.OpenStream(testURL(), name, 0, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ok, state := s.State(context.Background()); !ok || state != "connected, stream "+name {
		t.Errorf("State = %v %q", ok, state)
	}
	body := []byte("{\"a\":1}\x00\xff\xfe not UTF-8")
	ctx := context.Background()
	for _, j := range []inbox.Job{
		{ID: "job_1", Event: "job.completed", Body: body, Attempt: 1},
		{ID: "gh/d-1", Source: "gh", Key: "d-1", Event: "push", Body: []byte(`{}`), Attempt: 3},
	} {
		if err := s.Deliver(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := rdb.XRange(ctx, name, "-", "+").Result()
	if err != nil || len(entries) != 2 {
		t.Fatalf("entries %v, %v; want 2", entries, err)
	}
	want := []map[string]any{
		{"row_id": "job_1", "key": "job_1", "source": "sume", "event": "job.completed", "attempt": "1", "body": string(body)},
		{"row_id": "gh/d-1", "key": "d-1", "source": "gh", "event": "push", "attempt": "3", "body": "{}"},
	}
	for i, e := range entries {
		if len(e.Values) != len(want[i]) {
			t.Errorf("entry %d: %v, want %v", i, e.Values, want[i])
		}
		for k, v := range want[i] {
			if e.Values[k] != v {
				t.Errorf("entry %d: %s = %q, want %q", i, k, e.Values[k], v)
			}
		}
	}
}

// TestStreamMaxLen: a stream with redis_maxlen is trimmed, about.
func TestStreamMaxLen(t *testing.T) {
	rdb := mustRedis(t)
	name := unique(t, rdb, "inbox-test-trim")
	s, err := redis.OpenStream(testURL(), name, 10, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 1000 {
		if err := s.Deliver(context.Background(), inbox.Job{ID: "j", Event: "e", Body: []byte("x"), Attempt: i + 1}); err != nil {
			t.Fatal(err)
		}
	}
	if n := rdb.XLen(context.Background(), name).Val(); n >= 1000 || n < 10 {
		t.Errorf("XLEN = %d after 1000 with maxlen 10: want it trimmed, to 10 or a little more", n)
	}
}

func TestJobID(t *testing.T) {
	for _, tt := range []struct{ row, job string }{
		{"job_1", "job_1"},
		{"vibe/run_1", "vibe/run_1"},
		{"123", "%3123"},
		{"0", "%30"},
		{"-7", "%2D7"},
		{"007", "%3007"},
		{"12a", "12a"},
		{"a:b", "a%3Ab"},
		{"%3123", "%253123"},
		{"1:2", "1%3A2"},
	} {
		got := redis.JobID(tt.row)
		if got != tt.job {
			t.Errorf("JobID(%q) = %q, want %q", tt.row, got, tt.job)
		}
		if back, err := url.PathUnescape(got); err != nil || back != tt.row {
			t.Errorf("JobID(%q) = %q decodes to %q, %v", tt.row, got, back, err)
		}
	}
}

// TestQueueDeliver adds jobs as BullMQ's Queue.add lays them out, and a
// second add of a row leaves its job as it is, even once a worker moved it
// on from the wait list.
func TestQueueDeliver(t *testing.T) {
	rdb := mustRedis(t)
	name := unique(t, rdb, "inbox-test-queue")
	q, err := redis.OpenQueue(testURL(), "", name, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ctx := context.Background()
	base := "bull:" + name + ":"
	j := inbox.Job{ID: "123", Event: "job.completed", Body: []byte(`{"job_id":"123"}`), Attempt: 1}
	if err := q.Deliver(ctx, j); err != nil {
		t.Fatal(err)
	}
	h := rdb.HGetAll(ctx, base+"%3123").Val()
	if h["name"] != "job.completed" || h["opts"] != `{"jobId":"%3123","attempts":0}` || h["delay"] != "0" || h["priority"] != "0" || h["timestamp"] == "" {
		t.Errorf("job hash = %v", h)
	}
	var d redis.Data
	if err := json.Unmarshal([]byte(h["data"]), &d); err != nil || d.RowID != "123" || d.Key != "123" || d.Source != "sume" || d.Event != "job.completed" || d.Attempt != 1 || d.Body != `{"job_id":"123"}` || d.BodyBase64 != nil {
		t.Errorf("data = %+v, %v", d, err)
	}
	if w := rdb.LRange(ctx, base+"wait", 0, -1).Val(); len(w) != 1 || w[0] != "%3123" {
		t.Errorf("wait = %v", w)
	}
	if m := rdb.ZRangeWithScores(ctx, base+"marker", 0, -1).Val(); len(m) != 1 || m[0].Member != "0" || m[0].Score != 0 {
		t.Errorf("marker = %v", m)
	}
	// A worker took it: the id is in no list, the hash is there.
	rdb.Del(ctx, base+"wait")
	j.Attempt = 2
	if err := q.Deliver(ctx, j); err != nil {
		t.Fatal(err)
	}
	if n := rdb.LLen(ctx, base+"wait").Val(); n != 0 {
		t.Errorf("a second add of row 123 queued it again: wait holds %d", n)
	}
	if h2 := rdb.HGetAll(ctx, base+"%3123").Val(); h2["data"] != h["data"] {
		t.Errorf("a second add changed the job: %v", h2)
	}
	var events []string
	for _, e := range rdb.XRange(ctx, base+"events", "-", "+").Val() {
		events = append(events, e.Values["event"].(string))
	}
	if strings.Join(events, ",") != "added,waiting,duplicated" {
		t.Errorf("events = %v, want added, waiting, duplicated", events)
	}

	// A queue paused by BullMQ takes jobs into its paused list, no marker.
	rdb.HSet(ctx, base+"meta", "paused", 1)
	rdb.Del(ctx, base+"marker")
	if err := q.Deliver(ctx, inbox.Job{ID: "job_2", Event: "e", Body: []byte("\xff"), Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	if p := rdb.LRange(ctx, base+"paused", 0, -1).Val(); len(p) != 1 || p[0] != "job_2" || rdb.Exists(ctx, base+"marker").Val() != 0 {
		t.Errorf("paused = %v, marker %d", p, rdb.Exists(ctx, base+"marker").Val())
	}
	if err := json.Unmarshal([]byte(rdb.HGet(ctx, base+"job_2", "data").Val()), &d); err != nil || string(d.BodyBase64) != "\xff" || d.Body != "" {
		t.Errorf("a body that is not UTF-8: data %+v, %v", d, err)
	}
}

// TestUnreachable: a Redis that does not answer stops nothing; the
// destination is a closed gate, says so, and a delivery is given back
// uncounted, naming no password.
func TestUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	raw := "redis://:hunter2pw@" + addr + "/0"
	s, err := redis.OpenStream(raw, "jobs", 0, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Ready(); !errors.Is(err, redis.ErrUnreachable) {
		t.Errorf("Ready = %v, want ErrUnreachable", err)
	}
	if ok, state := s.State(context.Background()); ok || state != "unreachable: dispatch paused, rows wait with no attempt counted" {
		t.Errorf("State = %v %q", ok, state)
	}
	err = s.Deliver(context.Background(), inbox.Job{ID: "j", Body: []byte("x"), Attempt: 1})
	if !dispatch.IsDown(err) || !errors.Is(err, redis.ErrUnreachable) {
		t.Errorf("Deliver = %v, want an outage (dispatch.Down) of ErrUnreachable", err)
	}
	for _, e := range []error{err, s.Ready()} {
		if strings.Contains(e.Error(), "hunter2pw") {
			t.Errorf("error %q holds the password", e)
		}
	}
}

// TestURLErrors: a URL go-redis cannot read is refused at once, shown
// without its password.
func TestURLErrors(t *testing.T) {
	for _, raw := range []string{
		"http://:hunter2pw@127.0.0.1:6379",
		"redis://:hunter2pw@127.0.0.1:6379/notadb",
		"redis://:hunter2pw@127.0.0.1:6379/0?bogus=1",
		"redis://:hunter2pw@[::1:6379/0",
		"redis://user:hunter2pw@127.0.0.1:6379/0?password=hunter2pw&x=\x7f",
		// A / ? or # in the password, not percent-encoded, ends the user
		// info early: url.Parse reads no password, yet there is one.
		"redis://:12#hunter2pw@127.0.0.1:6379",
		"redis://u:12/hunter2pw@127.0.0.1:6379/0",
		"redis://:12?hunter2pw=1@127.0.0.1:6379",
	} {
		_, err := redis.OpenStream(raw, "jobs", 0, zerolog.Nop())
		if err == nil {
			t.Errorf("%q: opened", raw)
			continue
		}
		if strings.Contains(err.Error(), "hunter2pw") {
			t.Errorf("%q: error %q holds the password", raw, err)
		}
	}
	for _, tt := range []struct{ prefix, name string }{{"", ""}, {"bull", "a:b"}, {"a:b", "q"}} {
		if err := redis.CheckQueue("redis://127.0.0.1:6379", tt.prefix, tt.name); err == nil {
			t.Errorf("CheckQueue(%q, %q) = nil", tt.prefix, tt.name)
		}
	}
}
