package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"inbox/testport"
)

// sharedRedis is the Redis every machine of the project runs, database 12
// for these tests: each test's stream and queue names are its own, and
// deleted after.
const sharedRedis = "redis://127.0.0.1:6379/12"

// requireRedis returns a client to url, skipping the test when Redis does
// not answer, or failing it with INBOX_REQUIRE_REDIS=1, as CI sets.
func requireRedis(t *testing.T, url string) *goredis.Client {
	t.Helper()
	opts, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := goredis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		if os.Getenv("INBOX_REQUIRE_REDIS") != "" {
			t.Fatalf("redis at %s: %v (INBOX_REQUIRE_REDIS is set)", url, err)
		}
		t.Skipf("no redis at %s: %v", url, err)
	}
	return rdb
}

// uniqueName is a name for a test's stream or queue no other run uses;
// every key under it is deleted when the test ends.
func uniqueName(t *testing.T, rdb *goredis.Client, prefix string) string {
	b := make([]byte, 6)
	rand.Read(b)
	name := prefix + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx := context.Background()
		for _, pattern := range []string{name, "*:" + name + ":*"} {
			var cursor uint64
			for {
				keys, next, err := rdb.Scan(ctx, cursor, pattern, 1000).Result()
				if err != nil {
					break
				}
				if len(keys) > 0 {
					rdb.Del(ctx, keys...)
				}
				if cursor = next; cursor == 0 {
					break
				}
			}
		}
	})
	return name
}

// redisServer is a redis-server of the test's own on a free port, with
// appendonly yes and appendfsync always in a folder of its own, so it can
// be killed and started again as the same server, its data all there.
type redisServer struct {
	t        *testing.T
	port     int
	dir      string
	password string
	cmd      *exec.Cmd
	done     chan struct{}
}

// newRedisServer picks a free port for a redis-server that is not
// started yet, asking for password. It skips the test when there is no
// redis-server, or fails it with INBOX_REQUIRE_REDIS=1.
func newRedisServer(t *testing.T, password string) *redisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("INBOX_REQUIRE_REDIS") != "" {
			t.Fatal("no redis-server (INBOX_REQUIRE_REDIS is set)")
		}
		t.Skip("no redis-server")
	}
	r := &redisServer{t: t, port: testport.Later(t), dir: t.TempDir(), password: password}
	t.Cleanup(r.kill)
	return r
}

// url is the server's URL, its password in it.
func (r *redisServer) url() string {
	return fmt.Sprintf("redis://:%s@127.0.0.1:%d/0", r.password, r.port)
}

// start runs the server and waits until it answers.
func (r *redisServer) start() {
	r.t.Helper()
	r.cmd = exec.Command("redis-server", "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--dir", r.dir,
		"--save", "", "--appendonly", "yes", "--appendfsync", "always", "--requirepass", r.password)
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out syncBuffer
	r.cmd.Stdout, r.cmd.Stderr = &out, &out
	if err := r.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	r.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		cmd.Wait()
		close(done)
	}(r.cmd, r.done)
	opts, _ := goredis.ParseURL(r.url())
	rdb := goredis.NewClient(opts)
	defer rdb.Close()
	waitLong(r.t, 20*time.Second, "redis-server answering", func() bool {
		select {
		case <-r.done:
			r.t.Fatalf("redis-server on port %d ended:\n%s", r.port, out.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return rdb.Ping(ctx).Err() == nil
	})
}

// kill ends the server with SIGKILL: with appendfsync always, every write
// it answered is in its file.
func (r *redisServer) kill() {
	if r.cmd == nil {
		return
	}
	syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	<-r.done
	r.cmd = nil
}

// client is a client to the running server, closed when the test ends.
func (r *redisServer) client() *goredis.Client {
	opts, _ := goredis.ParseURL(r.url())
	rdb := goredis.NewClient(opts)
	r.t.Cleanup(func() { rdb.Close() })
	return rdb
}

// bullmqDir is the folder of the test's BullMQ worker, whose
// node_modules npmInstall makes.
const bullmqDir = "testdata/bullmq"

// npmOnce runs npm ci once for the whole run.
var npmOnce = sync.OnceValue(func() error {
	if _, err := os.Stat(filepath.Join(bullmqDir, "node_modules", "bullmq", "package.json")); err == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = bullmqDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("npm ci in %s: %v\n%s", bullmqDir, err, out)
	}
	return nil
})

// bullmqWorker is a real BullMQ Worker under Node.js (testdata/bullmq):
// it records each job it processes.
type bullmqWorker struct {
	out  string
	cmd  *exec.Cmd
	done chan struct{}
}

// processedJob is one line of the worker's record.
type processedJob struct {
	ID         string `json:"id"`
	RowID      string `json:"row_id"`
	Name       string `json:"name"`
	DataRowID  string `json:"data_row_id"`
	Attempt    int    `json:"attempt"`
	BodySHA256 string `json:"body_sha256"`
}

// startBullMQWorker runs a worker on queue under prefix at url and waits
// until it is ready. Without node or npm, or when npm ci fails, it skips
// the test, or fails it with INBOX_REQUIRE_BULLMQ=1, as CI sets.
func startBullMQWorker(t *testing.T, url, queue, prefix string) *bullmqWorker {
	t.Helper()
	skip := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("INBOX_REQUIRE_BULLMQ") != "" {
			t.Fatalf(format+" (INBOX_REQUIRE_BULLMQ is set)", args...)
		}
		t.Skipf(format, args...)
	}
	for _, c := range []string{"node", "npm"} {
		if _, err := exec.LookPath(c); err != nil {
			skip("no %s", c)
		}
	}
	if err := npmOnce(); err != nil {
		skip("%v", err)
	}
	w := &bullmqWorker{out: filepath.Join(t.TempDir(), "processed.jsonl"), done: make(chan struct{})}
	w.cmd = exec.Command("node", "worker.js", url, queue, prefix, w.out)
	w.cmd.Dir = bullmqDir
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := w.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	w.cmd.Stderr = logs
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "ready" {
				close(ready)
			}
		}
		w.cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
		<-w.done
	})
	select {
	case <-ready:
	case <-w.done:
		t.Fatalf("the bullmq worker exited at start:\n%s", logs)
	case <-time.After(30 * time.Second):
		t.Fatalf("the bullmq worker was not ready in 30s:\n%s", logs)
	}
	return w
}

// processed is every job the worker processed, in order.
func (w *bullmqWorker) processed(t *testing.T) []processedJob {
	t.Helper()
	b, err := os.ReadFile(w.out)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []processedJob
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var p processedJob
		if err := json.Unmarshal([]byte(line), &p); err != nil {
			continue // a line being written
		}
		out = append(out, p)
	}
	return out
}
