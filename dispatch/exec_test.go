package dispatch_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"inbox/dispatch"
	"inbox/inbox"
)

// script writes an executable shell script into a fresh folder and returns
// its path.
func script(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "handler.sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+text), 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestExecFailThenSucceed runs a real script through the dispatcher: it
// fails its first attempt, then stores the body under the job id, with the
// environment it was given.
func TestExecFailThenSucceed(t *testing.T) {
	t.Setenv("INBOX_FORWARD_SECRET", "must-not-leak")
	t.Setenv("SUME_API_KEY", "must-not-leak")
	out := t.TempDir()
	handler := script(t, `
set -e
if [ "$INBOX_ATTEMPT" = 1 ]; then
  echo "warming up" >&2
  echo "database is locked" >&2
  exit 3
fi
cat > "`+out+`/$INBOX_JOB_ID.json"
env > "`+out+`/$INBOX_JOB_ID.env"
`)
	e, err := dispatch.NewExec(handler, dispatch.Withheld{})
	if err != nil {
		t.Fatal(err)
	}
	c := newClock()
	s := storeWith(t, c, "job_1", "job_2")
	start(t, s, dispatch.Config{Destination: e, Now: c.Now, Workers: 2})
	waitRetry(t, s, "job_1", 1)
	waitRetry(t, s, "job_2", 1)
	if got := row(t, s, "job_1").LastError; got != "exit status 3: warming up database is locked" {
		t.Errorf("last error %q", got)
	}
	c.Advance(time.Second)
	for _, id := range []string{"job_1", "job_2"} {
		waitFor(t, id+" done", func() bool { return row(t, s, id).Status == inbox.StatusDone })
		got, err := os.ReadFile(filepath.Join(out, id+".json"))
		if err != nil || string(got) != body(id) {
			t.Errorf("%s: stdin was %q, %v", id, got, err)
		}
		env, err := os.ReadFile(filepath.Join(out, id+".env"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"INBOX_JOB_ID=" + id, "INBOX_EVENT=job.completed", "INBOX_ATTEMPT=2", "PATH="} {
			if !strings.Contains(string(env), want) {
				t.Errorf("%s: environment has no %s", id, want)
			}
		}
		if strings.Contains(string(env), "must-not-leak") {
			t.Errorf("%s: the command saw the inbox's secrets", id)
		}
	}
}

// TestExecReject: exit 65 parks the row at once, with the end of stderr.
func TestExecReject(t *testing.T) {
	t.Parallel()
	e, err := dispatch.NewExec(script(t, `echo "`+strings.Repeat("x", 600)+` bad job $INBOX_JOB_ID" >&2; exit 65`), dispatch.Withheld{})
	if err != nil {
		t.Fatal(err)
	}
	c := newClock()
	s := storeWith(t, c, "job_1")
	start(t, s, dispatch.Config{Destination: e, Now: c.Now})
	waitFor(t, "parked", func() bool { return row(t, s, "job_1").Status == inbox.StatusParked })
	r := row(t, s, "job_1")
	if r.Reason != inbox.ReasonHandlerRejected || !strings.HasPrefix(r.LastError, "exit status 65: …xxx") ||
		!strings.HasSuffix(r.LastError, "bad job job_1") || len(r.LastError) > 600 {
		t.Errorf("row = %+v", r)
	}
}

// TestExecTimeoutKillsGroup: a command that outlives its timeout is killed
// with everything it started.
func TestExecTimeoutKillsGroup(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	e, err := dispatch.NewExec(script(t, `sleep 60 & echo $! > `+pidFile+`; sleep 60`), dispatch.Withheld{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	err = e.Deliver(ctx, inbox.Job{ID: "job_1", Body: []byte(`{}`), Attempt: 1})
	if err == nil || dispatch.Rejected(err) || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("err = %v, want killed, retried", err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("took %v", took)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the background child gone", func() bool {
		// A killed child that nobody reaped yet is a zombie: gone too.
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		return syscall.Kill(pid, 0) != nil || err != nil || strings.Contains(string(stat), ") Z ")
	})
}

func TestNewExecRefusesEmpty(t *testing.T) {
	t.Parallel()
	if _, err := dispatch.NewExec("  ", dispatch.Withheld{}); err == nil {
		t.Error("an empty command was accepted")
	}
}

// TestExecExitCodes: exit 69 (EX_UNAVAILABLE) and 75 (EX_TEMPFAIL) say
// that the destination is down, exit 65 that the job is refused, any other
// exit that the job failed.
func TestExecExitCodes(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		code           int
		down, rejected bool
	}{{69, true, false}, {75, true, false}, {65, false, true}, {1, false, false}, {70, false, false}} {
		e, err := dispatch.NewExec("exit "+strconv.Itoa(tt.code), dispatch.Withheld{})
		if err != nil {
			t.Fatal(err)
		}
		err = e.Deliver(context.Background(), inbox.Job{ID: "job_1", Attempt: 1})
		if err == nil || dispatch.IsDown(err) != tt.down || dispatch.Rejected(err) != tt.rejected {
			t.Errorf("exit %d: %v, down %v, rejected %v; want down %v, rejected %v", tt.code, err, dispatch.IsDown(err), dispatch.Rejected(err), tt.down, tt.rejected)
		}
	}
}
