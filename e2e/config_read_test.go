package e2e

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// swapLink points the symbolic link link at target, in one rename, as an
// operator swapping configs does.
func swapLink(t *testing.T, target, link string) {
	t.Helper()
	tmp := link + ".new"
	os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, link); err != nil {
		t.Fatal(err)
	}
}

// waitExit sends SIGTERM to s and fails unless it exits within d.
func waitExit(t *testing.T, s *server, what string, d time.Duration) {
	t.Helper()
	s.signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(d):
		t.Fatalf("%s: still running %s after SIGTERM:\n%s", what, d, s.logs)
	}
}

// waitRefusals waits for n "reload refused" lines in s's log, and that the
// last one says want.
func waitRefusals(t *testing.T, s *server, n int, want string) {
	t.Helper()
	line := waitRefusal(t, s, want, n)
	if !strings.Contains(line, want) {
		t.Fatalf("refusal %d: %s, want it to say %q", n, line, want)
	}
}

// TestConfigBlockingReadStops serves and dispatches with a --config that
// is a link, swaps the link to a FIFO (whose open or read would wait for a
// writer forever) and sends SIGHUP: the reload is refused with one line,
// at once; a second SIGHUP is refused again; SIGTERM still stops both
// within a few seconds. Admin commands given the FIFO fail, not hang.
func TestConfigBlockingReadStops(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "inbox.db")
	real := filepath.Join(dir, "real.toml")
	if err := os.WriteFile(real, []byte(fanOutText(destTable("app", "http://127.0.0.1:1"))), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.toml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "inbox.toml")
	swapLink(t, real, link)
	env := []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}
	s := startInbox(t, env, "serve", "--addr", "127.0.0.1:0", "--db", db, "--config", link)
	d := startInbox(t, env, "dispatch", "--db", db, "--config", link)
	waitLog(t, d, "dispatching")

	swapLink(t, fifo, link)
	for i := 1; i <= 2; i++ {
		s.signal(syscall.SIGHUP)
		d.signal(syscall.SIGHUP)
		waitRefusals(t, s, i, "a FIFO, not a regular file")
		waitRefusals(t, d, i, "a FIFO, not a regular file")
	}
	waitExit(t, s, "serve", 5*time.Second)
	waitExit(t, d, "dispatch", 5*time.Second)

	for _, args := range [][]string{
		{"sources", "--config", fifo},
		{"serve", "--addr", "127.0.0.1:0", "--db", db, "--config", fifo},
		{"replay", "--db", db, "--config", fifo, "--destination", "app", "--since", "1h", "--dry-run"},
	} {
		out, code := runBounded(t, 10*time.Second, env, args...)
		if code == 0 || !strings.Contains(out, "a FIFO, not a regular file") {
			t.Errorf("inbox %s: exit %d, %q: want it refused, naming the FIFO", args[0], code, out)
		}
	}
}

// runBounded runs the binary with args and env, killed after d, and returns
// its output (stdout and stderr) and exit code.
func runBounded(t *testing.T, d time.Duration, env []string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("inbox %s: still running after %s: %s", strings.Join(args, " "), d, out)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// TestConfigEndlessReadRefused swaps serve's --config link to /dev/zero,
// /dev/urandom and a regular file of 64 MiB and sends SIGHUP after each:
// every reload is refused with one line, serve stays up and still stores
// deliveries, and its memory stays small. serve started with /dev/zero
// fails at once.
func TestConfigEndlessReadRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "inbox.db")
	real := filepath.Join(dir, "real.toml")
	if err := os.WriteFile(real, []byte(reloadConfig([]string{"sume", e2eSecret})), 0o600); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.toml")
	if err := os.WriteFile(huge, []byte(reloadConfig([]string{"sume", e2eSecret})), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, 64<<20); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "inbox.toml")
	swapLink(t, real, link)
	s := startInbox(t, nil, "serve", "--addr", "127.0.0.1:0", "--db", db, "--config", link)
	for i, tc := range []struct{ target, want string }{
		{"/dev/zero", "a character device, not a regular file"},
		{"/dev/urandom", "a character device, not a regular file"},
		{huge, "larger than 1048576 bytes"},
	} {
		swapLink(t, tc.target, link)
		s.signal(syscall.SIGHUP)
		waitRefusals(t, s, i+1, tc.want)
		if code := send(t, &http.Client{Timeout: 5 * time.Second}, s.url, jobBody("after_"+strconv.Itoa(i)), e2eSecret); code != 204 {
			t.Fatalf("a delivery after the refused reload of %s: %d, want 204", tc.target, code)
		}
		if rss := residentMiB(t, s); rss > 200 {
			t.Fatalf("serve holds %d MiB after the reload of %s", rss, tc.target)
		}
	}
	waitExit(t, s, "serve", 5*time.Second)

	out, code := runBounded(t, 10*time.Second, nil, "serve", "--addr", "127.0.0.1:0", "--db", db, "--config", "/dev/zero")
	if code == 0 || !strings.Contains(out, "a character device, not a regular file") {
		t.Errorf("serve --config /dev/zero: exit %d, %q: want it refused", code, out)
	}
}

// residentMiB is s's resident memory in MiB, from /proc.
func residentMiB(t *testing.T, s *server) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(s.cmd.Process.Pid) + "/status")
	if err != nil {
		t.Fatalf("serve's memory: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.Atoi(f[1])
			return kb / 1024
		}
	}
	t.Fatal("serve's memory: no VmRSS")
	return 0
}
