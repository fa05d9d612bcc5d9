// Package e2e drives the real inbox binary end to end: serve, dispatch and
// the operator's commands as a user runs them, on real SQLite files in
// t.TempDir(), every listener on a port the system picks.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"inbox/sume"
	"inbox/testparallel"
)

const e2eSecret = "e2e-secret-value"

// binDir holds the binary the tests build; TestMain removes it.
var binDir string

// TestMain gives the tests a folder for the binary, built once by the
// first test that runs it, and removes it when they are done. Unless
// -parallel is given, as many as parallelPerCPU says of the tests that
// call t.Parallel run at once.
func TestMain(m *testing.M) {
	flag.Parse()
	testparallel.Default(parallelPerCPU)
	dir, err := os.MkdirTemp("", "inbox-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// parallelPerCPU is how many tests that call t.Parallel run at once by
// default, per CPU: each has its own binary runs, folder, ports and schema,
// and spends much of its time waiting on them, so four times the CPUs (Go's
// default is GOMAXPROCS) keeps them busy without starving the runs whose
// deadlines the tests check. Tests that measure time, memory or load
// closely, hold a process-wide setting or fill a file system stay serial:
// Go runs them one at a time before the parallel ones start.
const parallelPerCPU = 4

// buildCommit is the commit the tests' binary is told it was built from.
const buildCommit = "0123456789abcdef0123456789abcdef01234567"

// buildBinary builds the real inbox binary, the module's main package,
// once per test run, as the README builds a release: without cgo (a
// static binary, Go's own resolver), the commit given through -ldflags
// (TestVersionNamesTheBuild reads it back), none taken from the checkout
// (-buildvcs=false). It leaves out the symbol table and DWARF (-s -w),
// which nothing the binary does reads (a panic's trace comes from the
// runtime's own tables) and which take a third of the link's time.
var buildBinary = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(binDir, "inbox")
	cmd := exec.Command("go", "build", "-buildvcs=false", "-ldflags", "-s -w -X main.commit="+buildCommit, "-o", bin, "inbox")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", &buildError{out: string(out), err: err}
	}
	return bin, nil
})

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

func binary(t testing.TB) string {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return bin
}

// server is a running `inbox serve`.
type server struct {
	cmd   *exec.Cmd
	url   string // the webhook URL
	admin string // where /healthz, /readyz and /metrics answer: http://host:port
	logs  *syncBuffer
	done  chan struct{} // closed once the process has exited
	err   error         // cmd.Wait's, once done is closed
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startServer runs the binary's serve on a free port and waits until it
// listens. It is killed when the test ends if still running.
func startServer(t testing.TB, db string, args ...string) *server {
	t.Helper()
	return startServerWrapped(t, db, nil, args...)
}

// startServerWrapped is startServer with the binary run under a wrapper
// command (such as strace). The server runs in its own process group, and
// signals go to the whole group.
func startServerWrapped(t testing.TB, db string, wrapper []string, args ...string) *server {
	t.Helper()
	return startWrapped(t, []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}, wrapper,
		append([]string{"serve", "--addr", "127.0.0.1:0", "--db", db}, args...)...)
}

// startInbox runs the binary with env added to this process's and args as
// given, in its own process group, and waits until it logs that it listens
// on every endpoint it serves: webhooks (the server's url) unless it is a
// dispatcher, and admin when --admin-addr is among args (else the admin
// paths answer beside the webhooks). It is killed when the test ends if
// still running.
func startInbox(t testing.TB, env []string, args ...string) *server {
	t.Helper()
	return startWrapped(t, env, nil, args...)
}

// startWrapped is startInbox with the binary run under a wrapper command.
func startWrapped(t testing.TB, env, wrapper []string, args ...string) *server {
	t.Helper()
	argv := append(append(slices.Clone(wrapper), binary(t)), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, logs: &syncBuffer{}, done: make(chan struct{})}
	// One line per endpoint: webhooks, and admin with --admin-addr.
	listening := make(chan [2]string, 2)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			s.logs.Write([]byte(line + "\n"))
			var m struct{ Message, Addr, Serves string }
			if json.Unmarshal([]byte(line), &m) == nil && m.Message == "listening" {
				listening <- [2]string{m.Serves, "http://" + m.Addr}
			}
		}
		s.err = cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		s.signal(syscall.SIGKILL)
		<-s.done
	})
	wantWeb, wantAdmin := args[0] == "serve", slices.Contains(args, "--admin-addr")
	timeout := time.After(20 * time.Second)
	for (wantWeb && s.url == "") || (wantAdmin && s.admin == "") {
		select {
		case l := <-listening:
			switch l[0] {
			case "webhooks":
				s.url = l[1] + "/webhooks/sume"
				if !wantAdmin {
					s.admin = l[1]
				}
			case "admin":
				s.admin = l[1]
			}
		case <-s.done:
			t.Fatalf("%s exited at start: %v\n%s", args[0], s.err, s.logs)
		case <-timeout:
			t.Fatalf("%s did not start:\n%s", args[0], s.logs)
		}
	}
	return s
}

// signal sends sig to the server's process group. Once the server has
// exited it does nothing.
func (s *server) signal(sig syscall.Signal) {
	syscall.Kill(-s.cmd.Process.Pid, sig)
}

// send posts body signed the way the provider does and returns the status.
func send(t testing.TB, client *http.Client, url, body, secret string) int {
	t.Helper()
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(sume.HeaderTimestamp, ts)
	req.Header.Set(sume.HeaderSignature, sume.SignatureHeader(ts, []byte(body), secret))
	resp, err := client.Do(req)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// runCLI runs the binary and returns stdout, stderr and the exit code.
func runCLI(t testing.TB, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

// TestNewUser walks the README's quick start: serve, a signed delivery
// answered 204, and `inbox list` showing the row while serve runs. The
// quick start must still say those steps.
func TestNewUser(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, quick, ok := strings.Cut(string(readme), "\n## Quick start\n")
	if !ok {
		t.Fatal(`README has no "## Quick start"`)
	}
	quick, _, _ = strings.Cut(quick, "\n## ")
	for _, s := range []string{"serve", "X-Sume-Webhook-Timestamp: $ts", "X-Sume-Webhook-Signature: sume-v1=$sig",
		"http://127.0.0.1:8080/webhooks/sume", "HTTP/1.1 204 No Content", "go run . list", "go run . parked", "inbox send"} {
		if !strings.Contains(quick, s) {
			t.Errorf("README's quick start does not say %q", s)
		}
	}
	db := filepath.Join(t.TempDir(), "inbox.db")
	srv := startServer(t, db)
	body := `{"event":"job.completed","job_id":"job_1","status":"COMPLETED"}`
	if got := send(t, http.DefaultClient, srv.url, body, e2eSecret); got != http.StatusNoContent {
		t.Fatalf("signed delivery: status %d, want 204\n%s", got, srv.logs)
	}
	if got := send(t, http.DefaultClient, srv.url, body, "forged"); got != http.StatusUnauthorized {
		t.Fatalf("forged delivery: status %d, want 401", got)
	}
	out, errOut, code := runCLI(t, nil, "list", "--db", db, "--json")
	if code != 0 {
		t.Fatalf("list: exit %d: %s", code, errOut)
	}
	var row struct {
		ID, Status, Event, Reason string
		Deliveries                int
		ReceivedAt                time.Time `json:"received_at"`
	}
	if err := json.Unmarshal([]byte(out), &row); err != nil {
		t.Fatalf("list --json: %v: %q", err, out)
	}
	if row.ID != "job_1" || row.Status != "new" || row.Event != "job.completed" || row.Deliveries != 1 || row.ReceivedAt.IsZero() {
		t.Errorf("row = %+v", row)
	}
	out, _, code = runCLI(t, nil, "stats", "--db", db)
	if code != 0 || !strings.Contains(out, "new") || !strings.Contains(out, "1") {
		t.Errorf("stats: exit %d:\n%s", code, out)
	}
	if strings.Contains(srv.logs.String(), e2eSecret) || strings.Contains(srv.logs.String(), "job.completed\\\"") {
		t.Errorf("log holds the secret or the body:\n%s", srv.logs)
	}
}

// TestCLIErrors checks that mistakes give one clear line and a non-zero exit.
func TestCLIErrors(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "missing.db")
	for _, args := range [][]string{
		{"list", "--db", missing},
		{"stats", "--db", missing},
		{"list", "--bogus"},
		{"list", "--status", "lost", "--db", missing},
		{"parked", "--db", missing},
		{"parked", "--bogus"},
		{"parked", "--since", "yesterday", "--db", missing},
		{"show", "--db", missing, "job_1"},
		{"show", "--db", missing},
		{"reprocess", "--db", missing, "--all"},
		{"reprocess", "--db", missing},
		{"reprocess", "--reason", "lost", "--db", missing},
		{"redeliver", "--db", missing, "--reason", "conflict"},
		{"redeliver", "--api-key", "k"},
		{"alert", "--db", missing},
		{"alert", "--bogus"},
		{"purge", "--db", missing, "--older-than", "30d"},
		{"purge", "--db", missing},
		{"send", "--secret", "s", "--url", "http://127.0.0.1:1/webhooks/sume"},
		{"send", "--secret", ""},
	} {
		out, errOut, code := runCLI(t, nil, args...)
		if code == 0 {
			t.Errorf("%v: exit 0", args)
		}
		if lines := strings.Count(strings.TrimSpace(errOut), "\n") + 1; lines != 1 || out != "" {
			t.Errorf("%v: want one line on stderr, got stdout %q stderr %q", args, out, errOut)
		}
		if strings.Contains(errOut, "goroutine") {
			t.Errorf("%v: stack trace: %s", args, errOut)
		}
	}
}

// TestOperateWhileServing runs the operator's commands on the real binary
// while serve holds the database: send, parked, show, reprocess, alert,
// purge. A sender keeps delivering while reprocess rewrites 72 MiB of
// bodies and purge runs; serve, waiting at most 500ms for the lock, must
// never answer 503. It runs before the parallel tests, not among them: a
// reprocess's turn with the lock (8 MiB of bodies and an fsync) can take
// longer than 500ms on a disk they keep busy.
func TestOperateWhileServing(t *testing.T) {
	db := filepath.Join(t.TempDir(), "inbox.db")
	srv := startServer(t, db, "--busy-timeout", "500ms")
	env := []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}
	run := func(want int, args ...string) string {
		t.Helper()
		out, errOut, code := runCLI(t, env, args...)
		if code != want {
			t.Fatalf("%v: exit %d, want %d\nstdout: %s\nstderr: %s", args, code, want, out, errOut)
		}
		return out
	}

	if out := run(0, "send", "--url", srv.url, "--job-id", "job_send"); out != "204 No Content\n" {
		t.Errorf("send printed %q, want the status", out)
	}
	run(0, "send", "--url", srv.url, "--job-id", "job_odd", "--event", "job.exploded")
	var row struct{ ID, Status, Event, JobStatus string }
	if err := json.Unmarshal([]byte(run(0, "show", "--db", db, "--json", "job_send")), &row); err != nil {
		t.Fatal(err)
	}
	if row.Status != "new" || row.Event != "job.completed" {
		t.Errorf("sent row = %+v, want new job.completed", row)
	}
	if out := run(0, "parked", "--db", db, "--group-by", "reason"); !strings.Contains(out, "unknown_event  1") {
		t.Errorf("parked --group-by reason:\n%s", out)
	}

	// The row is a second old at most: with --max-age 0s it counts.
	if out := run(0, "alert", "--db", db); out != "" {
		t.Errorf("alert under the threshold printed %q", out)
	}
	out, errOut, code := runCLI(t, nil, "alert", "--db", db, "--max-age", "0s")
	if code != 1 || !strings.HasPrefix(out, "unknown_event  1 parked longer than 0s") || errOut != "" {
		t.Errorf("alert: exit %d, stdout %q, stderr %q; want 1, the lines, nothing on stderr", code, out, errOut)
	}

	// Bodies above serve's --max-body (1MiB), parked too_large, sent four
	// at a time. The pad needs no escapes, so it is quoted by hand: %q
	// spends 0.7-0.8 s on the 72 MiB, "%s" under 0.12 s.
	const big = 48
	pad := strings.Repeat("x", 3<<19)
	bigs := make(chan int)
	var senders sync.WaitGroup
	for range 4 {
		senders.Go(func() {
			for i := range bigs {
				body := fmt.Sprintf(`{"event":"job.completed","job_id":"job_big_%d","status":"COMPLETED","pad":"%s"}`, i, pad)
				if got := send(t, http.DefaultClient, srv.url, body, e2eSecret); got != http.StatusNoContent {
					t.Errorf("big delivery %d: status %d", i, got)
				}
			}
		})
	}
	for i := range big {
		bigs <- i
	}
	close(bigs)
	senders.Wait()
	if t.Failed() {
		t.FailNow()
	}

	ctx, stop := context.WithCancel(context.Background())
	var live load
	sending := make(chan struct{})
	go func() {
		defer close(sending)
		live.run(ctx, func() string { return srv.url }, 1, "job_live")
	}()
	time.Sleep(100 * time.Millisecond)
	run(0, "reprocess", "--db", db, "--reason", "unknown_event", "--event", "job.completed", "--event", "job.exploded")
	if out := run(0, "reprocess", "--db", db, "--reason", "too_large", "--max-body", "4MiB"); !strings.HasPrefix(out, fmt.Sprintf("moved to new: %d\n", big)) {
		t.Errorf("reprocess too_large:\n%s", out)
	}
	run(0, "purge", "--db", db, "--older-than", "7d")
	time.Sleep(100 * time.Millisecond)
	stop()
	<-sending
	acked, statuses, _ := live.snapshot()
	t.Logf("deliveries while reprocess and purge ran: %v", statuses)
	if acked == 0 || statuses[http.StatusNoContent] != acked || len(statuses) != 1 {
		t.Errorf("while reprocess and purge ran serve answered %v, want only 204s\n%s", statuses, srv.logs)
	}

	if err := json.Unmarshal([]byte(run(0, "show", "--db", db, "--json", "job_odd")), &row); err != nil {
		t.Fatal(err)
	}
	if row.Status != "new" || row.Event != "job.exploded" {
		t.Errorf("reprocessed row = %+v, want new job.exploded", row)
	}
	if got := send(t, http.DefaultClient, srv.url, `{"event":"job.completed","job_id":"job_after"}`, e2eSecret); got != http.StatusNoContent {
		t.Errorf("serve after the commands: status %d\n%s", got, srv.logs)
	}
}

func TestSendRejected(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inbox.db")
	srv := startServer(t, db)
	body := filepath.Join(t.TempDir(), "body.json")
	if err := os.WriteFile(body, []byte("not json \x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCLI(t, []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=wrong"}, "send", "--url", srv.url)
	if code == 0 || out != "401 Unauthorized\n" || strings.Count(errOut, "\n") != 1 || strings.Contains(errOut, "wrong") {
		t.Errorf("wrong secret: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// The file's exact bytes are signed and stored.
	if _, errOut, code := runCLI(t, nil, "send", "--url", srv.url, "--secret", e2eSecret, "--body-file", body); code != 0 {
		t.Fatalf("send --body-file: exit %d: %s", code, errOut)
	}
	out, _, _ = runCLI(t, nil, "parked", "--db", db, "--json")
	var row struct {
		Reason string
		Size   int
	}
	if err := json.Unmarshal([]byte(out), &row); err != nil || row.Reason != "unparseable" || row.Size != len("not json \x00") {
		t.Errorf("parked --json = %q, want the file's bytes parked unparseable", out)
	}
}

// TestAlertExitCodes checks the codes cron sees, and that stderr stays
// quiet unless the inbox cannot be read.
func TestAlertExitCodes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, bytes.Repeat([]byte("garbage "), 200), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.db")
	startServer(t, empty) // creates it, and holds it open meanwhile
	for _, tt := range []struct {
		db   string
		code int
	}{{empty, 0}, {filepath.Join(dir, "missing.db"), 2}, {garbage, 2}} {
		out, errOut, code := runCLI(t, nil, "alert", "--db", tt.db, "--max-age", "0s")
		if code != tt.code || out != "" {
			t.Errorf("%s: exit %d, stdout %q; want %d and nothing", filepath.Base(tt.db), code, out, tt.code)
		}
		if lines := strings.Count(errOut, "\n"); (tt.code == 0 && errOut != "") || (tt.code == 2 && (lines != 1 || !strings.HasPrefix(errOut, "inbox: "))) {
			t.Errorf("%s: stderr %q", filepath.Base(tt.db), errOut)
		}
	}
}

// TestAlertUsageErrors: every mistake in alert's command line or
// environment exits 2, as an unreadable inbox does; 1 means an alert.
func TestAlertUsageErrors(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inbox.db")
	startServer(t, db) // creates it
	for _, tt := range []struct {
		env  []string
		args []string
	}{
		{nil, []string{"--max-age", "yesterday"}},
		{nil, []string{"--max-age", "-1h"}},
		{nil, []string{"--reason", "lost"}},
		{nil, []string{"--min-count", "0"}},
		{nil, []string{"--min-count", "many"}},
		{nil, []string{"--bogus"}},
		{nil, []string{"job_1"}},
		{[]string{"INBOX_ALERT_MAX_AGE=soon"}, nil},
		{[]string{"INBOX_ALERT_MIN_COUNT=abc"}, nil},
		{[]string{"INBOX_ALERT_MIN_COUNT=0"}, nil},
		{[]string{"INBOX_ALERT_REASON=lost"}, nil},
		{[]string{"INBOX_JSON=maybe"}, nil},
	} {
		out, errOut, code := runCLI(t, tt.env, append([]string{"alert", "--db", db}, tt.args...)...)
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "inbox: ") {
			t.Errorf("%v %v: exit %d, stdout %q, stderr %q; want 2 and one line on stderr", tt.env, tt.args, code, out, errOut)
		}
	}
}

// TestHelpVersionUnknown checks inbox help [command], --version, and that a
// word that is no command is an error saying so.
func TestHelpVersionUnknown(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"help"}, 0, "inbox serve"},
		{[]string{"help", "serve"}, 0, "inbox serve - receive webhooks"},
		{[]string{"--version"}, 0, "inbox version "},
	} {
		out, errOut, code := runCLI(t, nil, tt.args...)
		if code != tt.code || !strings.Contains(out, tt.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %d and %q", tt.args, code, out, errOut, tt.code, tt.want)
		}
	}
	out, errOut, code := runCLI(t, nil, "bogus")
	if want := "inbox: unknown command \"bogus\" (see inbox --help)\n"; code == 0 || out != "" || errOut != want {
		t.Errorf("bogus: exit %d, stdout %q, stderr %q; want non-zero and %q", code, out, errOut, want)
	}
}
