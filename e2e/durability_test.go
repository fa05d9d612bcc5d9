package e2e

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"inbox/sume"
)

// load drives signed deliveries with unique job ids at a server until ctx
// is done, and records what came back.
type load struct {
	mu       sync.Mutex
	acked    []string    // job ids answered 2xx
	statuses map[int]int // status code (0: transport error) -> count
	noRetry  int         // 503s without Retry-After
	last204  time.Time   // when the latest 2xx arrived
	first503 time.Time
}

// run sends from conns connections, each a keep-alive client, until ctx is
// done. url returns the current server address, so a restarted server on a
// new port is picked up.
func (l *load) run(ctx context.Context, url func() string, conns int, prefix string) {
	var wg sync.WaitGroup
	for c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			defer client.CloseIdleConnections()
			for i := 0; ctx.Err() == nil; i++ {
				id := fmt.Sprintf("%s_%d_%d", prefix, c, i)
				body := fmt.Sprintf(`{"event":"job.completed","job_id":%q,"status":"COMPLETED","payload":{"pad":%q}}`, id, strings.Repeat("x", 512))
				status, retryAfter := post(ctx, client, url(), body)
				if ctx.Err() != nil {
					return // the test stopped the load: not the server's answer
				}
				l.record(id, status, retryAfter)
				if status != http.StatusNoContent {
					time.Sleep(5 * time.Millisecond) // do not spin on a dead server
				}
			}
		}()
	}
	wg.Wait()
}

// pace sends n jobs, load_000 and on, to url one after another, every
// apart, in the background, as providers keep sending through an outage of
// a destination; each must be answered 204. The returned func waits for
// the last and returns the ids answered 204, in order.
func (l *load) pace(t *testing.T, url string, n int, every time.Duration) (wait func() []string) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			id := fmt.Sprintf("load_%03d", i)
			status, retryAfter := post(context.Background(), http.DefaultClient, url, fmt.Sprintf(`{"event":"job.completed","job_id":%q,"status":"COMPLETED"}`, id))
			l.record(id, status, retryAfter)
			if status != http.StatusNoContent {
				t.Errorf("delivery %s: %d", id, status)
				return
			}
			time.Sleep(every)
		}
	}()
	return func() []string { <-done; return l.sent() }
}

// sent is the ids answered 2xx so far, in order.
func (l *load) sent() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.acked)
}

func (l *load) record(id string, status int, retryAfter string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.statuses == nil {
		l.statuses = map[int]int{}
	}
	l.statuses[status]++
	switch {
	case status >= 200 && status < 300:
		l.acked = append(l.acked, id)
		l.last204 = time.Now()
	case status == http.StatusServiceUnavailable:
		if retryAfter == "" {
			l.noRetry++
		}
		if l.first503.IsZero() {
			l.first503 = time.Now()
		}
	}
}

func (l *load) snapshot() (acked int, statuses map[int]int, last204 time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	statuses = map[int]int{}
	for k, v := range l.statuses {
		statuses[k] = v
	}
	return len(l.acked), statuses, l.last204
}

func post(ctx context.Context, client *http.Client, url, body string) (int, string) {
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, ""
	}
	req.Header.Set(sume.HeaderTimestamp, ts)
	req.Header.Set(sume.HeaderSignature, sume.SignatureHeader(ts, []byte(body), e2eSecret))
	resp, err := client.Do(req)
	if err != nil {
		return 0, ""
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// checkStored opens the database as a separate process would and checks
// that every acknowledged job is there and the file is intact.
func checkStored(t *testing.T, db string, acked []string) {
	t.Helper()
	conn, err := sql.Open("sqlite", db+"?_pragma=query_only(ON)")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var integrity string
	if err := conn.QueryRow("PRAGMA integrity_check").Scan(&integrity); err != nil || integrity != "ok" {
		t.Errorf("integrity_check = %q, %v; want ok", integrity, err)
	}
	found := 0
	var lost []string
	for _, id := range acked {
		var status string
		if err := conn.QueryRow("SELECT status FROM events WHERE id = ?", id).Scan(&status); err == nil && status == "new" {
			found++
		} else {
			lost = append(lost, id)
		}
	}
	t.Logf("acknowledged=%d found=%d lost=%d", len(acked), found, len(lost))
	if len(lost) > 0 {
		t.Errorf("acknowledged but not stored: %v", lost[:min(len(lost), 10)])
	}
	if len(acked) == 0 {
		t.Error("nothing was acknowledged: the test proved nothing")
	}
}

// TestCrash kills the real binary with SIGKILL mid-load several times and
// checks that every delivery it acknowledged survived.
func TestCrash(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inbox.db")
	l := &load{}
	var mu sync.Mutex
	url := ""
	current := func() string { mu.Lock(); defer mu.Unlock(); return url }

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := startServer(t, db)
	url = srv.url
	done := make(chan struct{})
	go func() { l.run(ctx, current, 16, "crash"); close(done) }()
	for round := range 4 {
		time.Sleep(time.Duration(300+150*round) * time.Millisecond)
		srv.signal(syscall.SIGKILL)
		<-srv.done
		srv = startServer(t, db)
		mu.Lock()
		url = srv.url
		mu.Unlock()
	}
	time.Sleep(300 * time.Millisecond)
	srv.signal(syscall.SIGKILL)
	<-srv.done
	cancel()
	<-done
	acked, statuses, _ := l.snapshot()
	t.Logf("statuses: %v", statuses)
	if acked < 100 {
		t.Fatalf("only %d deliveries acknowledged: not enough load to prove anything", acked)
	}
	checkStored(t, db, l.acked)
}

// TestAnswerFollowsFsync traces the real binary with strace and checks that
// every 204 is written to its socket only after an fsync of the WAL that
// completed after the request was read.
func TestAnswerFollowsFsync(t *testing.T) {
	if _, err := exec.LookPath("strace"); err != nil {
		t.Skip("strace is not installed (.ci/run installs it)")
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "inbox.db")
	trace := filepath.Join(dir, "trace.txt")
	// -y names each fd's file or socket; -s 16 shows "HTTP/1.1 204 No " and
	// "POST /webhooks/s"; -f follows every thread.
	srv := startServerWrapped(t, db, []string{"strace", "-f", "-y", "-s", "16", "-o", trace,
		"-e", "trace=read,write,fsync,fdatasync"})
	l := &load{}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	l.run(ctx, func() string { return srv.url }, 4, "fsync")
	srv.signal(syscall.SIGTERM)
	<-srv.done
	acked, _, _ := l.snapshot()

	checked, err := checkFsyncOrder(trace)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("acknowledged=%d answers traced=%d, each preceded by a WAL fsync after its request", acked, checked)
	if checked == 0 || checked < acked/2 {
		t.Fatalf("traced %d answers for %d acknowledged deliveries", checked, acked)
	}
}

var (
	traceRead    = regexp.MustCompile(`^(\d+)\s+read\(\d+<([^>]*)>, (.*)$`)
	traceReadEnd = regexp.MustCompile(`^(\d+)\s+<\.\.\. read resumed>(.*)$`)
	traceGotData = regexp.MustCompile(`= [1-9]\d*$`)
	traceWrite   = regexp.MustCompile(`^\d+\s+write\(\d+<(socket:\[\d+\])>, "HTTP/1.1 204`)
	traceSync    = regexp.MustCompile(`^(\d+)\s+(?:fsync|fdatasync)\(\d+<([^>]*)>(.*)$`)
	traceResumed = regexp.MustCompile(`^(\d+)\s+<\.\.\. (?:fsync|fdatasync) resumed>.*= 0$`)
)

// checkFsyncOrder reads an strace log in order. strace serializes what it
// sees, so line order is event order: a complete syscall line, or a
// "resumed" line, marks the end of the call. It counts completed fsyncs of
// the WAL; for every socket it remembers the count when data was last read
// from it (the request, which the server may read in pieces), and requires a
// higher count by the time a 204 is written there.
func checkFsyncOrder(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	syncs := 0
	readAt := map[string]int{}         // socket -> syncs when its last request was read
	pendingWAL := map[string]bool{}    // thread -> its unfinished fsync is on the WAL
	pendingRead := map[string]string{} // thread -> what its unfinished read reads
	checked := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if m := traceSync.FindStringSubmatch(text); m != nil {
			wal := strings.HasSuffix(m[2], "-wal")
			switch {
			case strings.Contains(m[3], "<unfinished"):
				pendingWAL[m[1]] = wal
			case wal && strings.HasSuffix(m[3], "= 0"):
				syncs++
			}
			continue
		}
		if m := traceResumed.FindStringSubmatch(text); m != nil {
			if pendingWAL[m[1]] {
				syncs++
			}
			delete(pendingWAL, m[1])
			continue
		}
		if m := traceRead.FindStringSubmatch(text); m != nil {
			switch {
			case strings.Contains(m[3], "<unfinished"):
				pendingRead[m[1]] = m[2]
			case strings.HasPrefix(m[2], "socket:") && traceGotData.MatchString(m[3]):
				readAt[m[2]] = syncs
			}
			continue
		}
		if m := traceReadEnd.FindStringSubmatch(text); m != nil {
			if from := pendingRead[m[1]]; strings.HasPrefix(from, "socket:") && traceGotData.MatchString(m[2]) {
				readAt[from] = syncs
			}
			delete(pendingRead, m[1])
			continue
		}
		if m := traceWrite.FindStringSubmatch(text); m != nil {
			at, ok := readAt[m[1]]
			if !ok {
				return checked, fmt.Errorf("line %d: a 204 on %s with no request read before it", line, m[1])
			}
			if syncs <= at {
				return checked, fmt.Errorf("line %d: a 204 on %s with no WAL fsync since its request was read", line, m[1])
			}
			checked++
		}
	}
	return checked, sc.Err()
}

// TestOutageLocked holds the write lock from another process past the busy
// timeout while deliveries keep coming: they get 503 with Retry-After, never
// a 2xx or a 500, and the server recovers within a second of the release.
func TestOutageLocked(t *testing.T) {
	db := filepath.Join(t.TempDir(), "inbox.db")
	srv := startServer(t, db, "--busy-timeout", "100ms")
	// While the lock is held no commit can happen, so no 2xx either.
	outage(t, db, srv, true, func() func() {
		holder, err := sql.Open("sqlite", db+"?_txlock=immediate&_pragma=busy_timeout(5000)")
		if err != nil {
			t.Fatal(err)
		}
		tx, err := holder.Begin()
		if err != nil {
			t.Fatal(err)
		}
		return func() { tx.Rollback(); holder.Close() }
	})
}

// TestOutageDiskFull fills the file system the database is on, then frees
// it, under load.
func TestOutageDiskFull(t *testing.T) {
	dir := t.TempDir()
	// Room for what the load itself writes in a few seconds, a WAL of up to
	// 4 MiB before its checkpoint included: with less, the load alone fills
	// the disk and freeing the filler does not end the outage.
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs here (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	db := filepath.Join(dir, "inbox.db")
	srv := startServer(t, db)
	// A full disk may still take commits that reuse WAL space, so 2xx
	// answers during it are fine as long as they are stored.
	outage(t, db, srv, false, func() func() {
		filler := filepath.Join(dir, "filler")
		f, err := os.Create(filler)
		if err != nil {
			t.Fatal(err)
		}
		chunk := make([]byte, 64<<10)
		for {
			if _, err := f.Write(chunk); err != nil {
				break // ENOSPC: the disk is full
			}
		}
		f.Close()
		return func() { os.Remove(filler) }
	})
}

// outage drives load, causes an outage with cause (which returns the
// function that clears it), and checks the answers before, during and after.
// With noAcks, no 2xx may be answered once the outage is under way.
func outage(t *testing.T, db string, srv *server, noAcks bool, cause func() (clear func())) {
	t.Helper()
	l := &load{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { l.run(ctx, func() string { return srv.url }, 8, "outage"); close(done) }()

	time.Sleep(300 * time.Millisecond)
	clear := cause()
	time.Sleep(500 * time.Millisecond) // past the busy timeout: in-flight commits are done
	ackedBefore, _, _ := l.snapshot()
	time.Sleep(1000 * time.Millisecond)
	ackedDuring, during, _ := l.snapshot()
	if noAcks && ackedDuring != ackedBefore {
		t.Errorf("%d deliveries answered 2xx during the outage", ackedDuring-ackedBefore)
	}
	clearedAt := time.Now()
	clear()
	deadline := time.Now().Add(3 * time.Second)
	var last204 time.Time
	for time.Now().Before(deadline) {
		if _, _, last204 = l.snapshot(); last204.After(clearedAt) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	cancel()
	<-done
	srv.signal(syscall.SIGTERM)
	<-srv.done

	_, statuses, _ := l.snapshot()
	t.Logf("statuses: %v; recovered %v after the cause cleared", statuses, last204.Sub(clearedAt).Round(time.Millisecond))
	if during[http.StatusServiceUnavailable] == 0 {
		t.Errorf("no 503 during the outage: %v", during)
	}
	for code := range statuses {
		if code != http.StatusNoContent && code != http.StatusServiceUnavailable {
			t.Errorf("answered %d %d times; want only 204 and 503", code, statuses[code])
		}
	}
	if l.noRetry > 0 {
		t.Errorf("%d 503s without Retry-After", l.noRetry)
	}
	if rec := last204.Sub(clearedAt); rec <= 0 || rec > time.Second {
		t.Errorf("recovered %v after the cause cleared, want within 1s", rec)
		logs := srv.logs.String()
		t.Logf("server log tail:\n%s", logs[max(0, len(logs)-3000):])
	}
	checkStored(t, db, l.acked)
}
