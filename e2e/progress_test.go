package e2e

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// progressLine is the dispatcher's summary line.
type progressLine struct {
	Level       string `json:"level"`
	Message     string `json:"message"`
	Destination string `json:"destination"`
	Kind        string `json:"kind"`
	HandedOn    int    `json:"handed_on"`
	Retried     int    `json:"retried"`
	Parked      int    `json:"parked"`
}

// progressLines returns the summary lines logs holds.
func progressLines(logs string) []progressLine {
	var out []progressLine
	for l := range strings.SplitSeq(logs, "\n") {
		var p progressLine
		if json.Unmarshal([]byte(l), &p) == nil && p.Message == "dispatch progress" {
			out = append(out, p)
		}
	}
	return out
}

// TestDispatchProgress runs serve with an --exec destination that takes
// two rows, refuses one for good and fails one: within about 10 s of the
// work the log says, at info, 2 handed on, 1 retried and 2 parked for the
// exec destination; then, idle, it says nothing more.
func TestDispatchProgress(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inbox.db")
	srv := startServer(t, db, "--retry-schedule", "50ms",
		"--exec", `case "$INBOX_KEY" in ok*) exit 0;; rej*) exit 65;; *) exit 1;; esac`)
	began := time.Now()
	for _, id := range []string{"ok_1", "ok_2", "rej_1", "bad_1"} {
		if code := send(t, http.DefaultClient, srv.url, `{"event":"job.completed","job_id":"`+id+`","status":"COMPLETED"}`, e2eSecret); code != http.StatusNoContent {
			t.Fatalf("%s: %d, want 204", id, code)
		}
	}
	var sum progressLine
	waitLong(t, 15*time.Second, "the progress lines to count the work", func() bool {
		sum = progressLine{}
		for _, p := range progressLines(srv.logs.String()) {
			if p.Level != "info" || p.Destination != "default" || p.Kind != "exec" {
				t.Fatalf("progress line %+v: want info, for exec", p)
			}
			sum.HandedOn, sum.Retried, sum.Parked = sum.HandedOn+p.HandedOn, sum.Retried+p.Retried, sum.Parked+p.Parked
		}
		return sum.HandedOn >= 2 && sum.Retried >= 1 && sum.Parked >= 2
	})
	if sum.HandedOn != 2 || sum.Retried != 1 || sum.Parked != 2 {
		t.Errorf("progress counted %+v, want 2 handed on, 1 retried, 2 parked", sum)
	}
	if took := time.Since(began); took > 12*time.Second {
		t.Errorf("the progress line came %s after the work, want within about 10 s", took)
	}
	lines := len(progressLines(srv.logs.String()))
	// Idle for longer than the period: no line.
	time.Sleep(11 * time.Second)
	if n := len(progressLines(srv.logs.String())); n != lines {
		t.Errorf("idle: %d more progress lines\n%s", n-lines, srv.logs)
	}
}

// TestStatsWatch runs inbox stats --watch 200ms beside serve: it redraws,
// a frame showing the row delivered meanwhile, and SIGINT ends it with 0.
func TestStatsWatch(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inbox.db")
	srv := startServer(t, db)
	cmd := exec.Command(binary(t), "stats", "--db", db, "--watch", "200ms")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	frames := make(chan string, 100)
	go func() {
		defer close(frames)
		sc := bufio.NewScanner(out)
		var frame strings.Builder
		for sc.Scan() {
			l := strings.TrimPrefix(sc.Text(), "\x1b[H\x1b[2J")
			if strings.HasPrefix(l, "inbox stats, every ") && frame.Len() > 0 {
				frames <- frame.String()
				frame.Reset()
			}
			frame.WriteString(l + "\n")
		}
		frames <- frame.String()
	}()
	newRows := func(frame string) string {
		for l := range strings.SplitSeq(frame, "\n") {
			if f := strings.Fields(l); len(f) == 3 && f[0] == "new" {
				return f[1]
			}
		}
		return ""
	}
	next := func() string {
		t.Helper()
		select {
		case f, ok := <-frames:
			if !ok {
				t.Fatalf("stats --watch ended: %s", stderr.String())
			}
			return f
		case <-time.After(5 * time.Second):
			t.Fatal("no frame within 5s")
		}
		return ""
	}
	if f := next(); newRows(f) != "0" {
		t.Fatalf("first frame:\n%s\nwant 0 new rows", f)
	}
	if code := send(t, http.DefaultClient, srv.url, `{"event":"job.completed","job_id":"job_1","status":"COMPLETED"}`, e2eSecret); code != http.StatusNoContent {
		t.Fatalf("delivery: %d", code)
	}
	for n := 0; newRows(next()) != "1"; n++ {
		if n > 20 {
			t.Fatal("no frame shows the new row")
		}
	}
	cmd.Process.Signal(syscall.SIGINT)
	for range frames {
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("stats --watch after SIGINT: %v, want exit 0; stderr %q", err, stderr.String())
	}
}
