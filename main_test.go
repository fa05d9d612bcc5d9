package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"inbox/sume"
)

const e2eSecret = "e2e-secret-value"

// buildBinary builds the real inbox binary once per test run.
var buildBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "inbox-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "inbox")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
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
	cmd  *exec.Cmd
	url  string
	logs *syncBuffer
	done chan struct{} // closed once the process has exited
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
	argv := append(append(wrapper, binary(t), "serve", "--addr", "127.0.0.1:0", "--db", db), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(os.Environ(), "SUME_COM_WEBHOOK_SIGNING_SECRET="+e2eSecret)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, logs: &syncBuffer{}, done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			s.logs.Write([]byte(line + "\n"))
			var m struct{ Message, Addr string }
			if json.Unmarshal([]byte(line), &m) == nil && m.Message == "listening" {
				addr <- m.Addr
			}
		}
		cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		s.signal(syscall.SIGKILL)
		<-s.done
	})
	select {
	case a := <-addr:
		s.url = "http://" + a + "/webhooks/sume"
	case <-time.After(20 * time.Second):
		t.Fatalf("server did not start:\n%s", s.logs)
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

// TestNewUser walks the README: serve, a signed delivery answered 204, and
// `inbox list` showing the row while serve runs.
func TestNewUser(t *testing.T) {
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

// TestServeRefusesEmptySecret covers contract row 21 on the real binary.
func TestServeRefusesEmptySecret(t *testing.T) {
	db := filepath.Join(t.TempDir(), "inbox.db")
	for _, secret := range []string{"", " ", "good,"} {
		_, errOut, code := runCLI(t, []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + secret}, "serve", "--db", db, "--addr", "127.0.0.1:0")
		if code == 0 {
			t.Fatalf("secret %q: serve started", secret)
		}
		if !strings.Contains(errOut, "secret") || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("secret %q: want one line naming the secret, got %q", secret, errOut)
		}
	}
	if _, err := os.Stat(db); err == nil {
		t.Error("serve created the database before refusing to start")
	}
}

// TestCLIErrors checks that mistakes give one clear line and a non-zero exit.
func TestCLIErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.db")
	for _, args := range [][]string{
		{"list", "--db", missing},
		{"stats", "--db", missing},
		{"list", "--bogus"},
		{"list", "--status", "lost", "--db", missing},
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

// TestHelpShowsExamples checks that every command's help has an example.
func TestHelpShowsExamples(t *testing.T) {
	var out bytes.Buffer
	app := newApp(&out, io.Discard)
	cmds := []string{""}
	for _, c := range app.Commands {
		cmds = append(cmds, c.Name)
	}
	for _, name := range cmds {
		out.Reset()
		args := []string{"inbox", "--help"}
		if name != "" {
			args = []string{"inbox", name, "--help"}
		}
		if err := newApp(&out, io.Discard).RunContext(context.Background(), args); err != nil {
			t.Fatalf("%s --help: %v", name, err)
		}
		if !strings.Contains(out.String(), "Examples:") || !strings.Contains(out.String(), "inbox "+name) {
			t.Errorf("%q --help has no example:\n%s", name, out.String())
		}
	}
}
