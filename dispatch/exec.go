package dispatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"inbox/inbox"
	"inbox/scheme"
)

// ExitReject is the exit status with which a command says a job must never
// be retried: EX_DATAERR from sysexits.h ("the input data was incorrect").
// The row is parked handler_rejected at once. Exit 0 is success; any other
// status, a signal or the timeout is retried.
const ExitReject = 65

// The environment a command gets about its job.
const (
	EnvJobID   = "INBOX_JOB_ID" // the row's id, as EnvRowID (its name since before sources)
	EnvRowID   = "INBOX_ROW_ID" // the row's id, unique across sources: inbox show takes it
	EnvSource  = "INBOX_SOURCE" // the configured source the row came through
	EnvKey     = "INBOX_KEY"    // the provider's own key: the key for external effects, with EnvSource
	EnvEvent   = "INBOX_EVENT"
	EnvAttempt = "INBOX_ATTEMPT"
)

// minContained is the shortest secret looked for inside a variable's value
// (a URL, a list); a shorter one withholds only a variable equal to it, so
// a toy secret such as "s" does not withhold PATH.
const minContained = 8

// maxStderr bounds the end of a command's stderr kept as its error.
const maxStderr = 512

// waitDelay bounds how long a command's pipes are waited for after it was
// killed or has exited (a background child may hold them).
const waitDelay = 2 * time.Second

// Exec runs a command per job, through /bin/sh -c, with the body on stdin.
type Exec struct {
	command string
	env     []string
}

// Withheld names what of this process's environment a command must not
// see besides the INBOX_* and SUME_* variables: the secrets the inbox is
// configured with.
type Withheld struct {
	// Names are variables that hold secrets, such as those the sources'
	// [[source.secret]] tables read (env = ...).
	Names []string
	// Secrets are the configured secrets themselves, as written or as
	// keys: a variable whose value is one, or holds one of minContained
	// bytes or more, or is whsec_ and the base64 of one, is withheld,
	// whatever its name.
	Secrets []string
}

// NewExec returns an Exec running command. The command inherits this
// process's environment except the variables named INBOX_* and SUME_* (they
// hold the inbox's settings and secrets) and those w withholds, plus
// EnvJobID, EnvRowID, EnvSource, EnvKey, EnvEvent and EnvAttempt. It fails
// when command is empty.
func NewExec(command string, w Withheld) (*Exec, error) {
	if strings.TrimSpace(command) == "" {
		return nil, errors.New("exec: empty command")
	}
	return &Exec{command: command, env: w.filter(os.Environ())}, nil
}

// filter returns the entries of environ a command may see.
func (w Withheld) filter(environ []string) []string {
	var env []string
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "INBOX_") || strings.HasPrefix(name, "SUME_") ||
			slices.Contains(w.Names, name) || w.holdsSecret(value) {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// holdsSecret reports whether value is, holds or encodes a secret of w.
func (w Withheld) holdsSecret(value string) bool {
	trimmed := strings.TrimSpace(value)
	var key string
	if strings.HasPrefix(trimmed, "whsec_") {
		if k, err := scheme.StandardKey(trimmed); err == nil {
			key = string(k)
		}
	}
	for _, s := range w.Secrets {
		switch {
		case s == "":
		case value == s, trimmed == s, key == s:
			return true
		case len(s) >= minContained && strings.Contains(value, s):
			return true
		}
	}
	return false
}

// Deliver runs the command for j in a process group of its own, killed
// whole when ctx is done. Its stdout is discarded; the end of its stderr is
// the error.
func (e *Exec) Deliver(ctx context.Context, j inbox.Job) error {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", e.command)
	source, key := j.Origin()
	cmd.Env = append(e.env[:len(e.env):len(e.env)],
		EnvJobID+"="+j.ID, EnvRowID+"="+j.ID, EnvSource+"="+source, EnvKey+"="+key,
		EnvEvent+"="+j.Event, EnvAttempt+"="+strconv.Itoa(j.Attempt))
	cmd.Stdin = bytes.NewReader(j.Body)
	stderr := &tail{max: maxStderr}
	cmd.Stderr = stderr
	// Its own group: the timeout kills what it started too, and a Ctrl-C
	// at the terminal stops the dispatcher, which lets it finish.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = waitDelay
	err := cmd.Run()
	if err == nil {
		return nil
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return fmt.Errorf("run command: %w", err)
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("killed: %w", ctx.Err())
	} else {
		err = errors.New(exit.String()) // "exit status 3", "signal: killed"
	}
	if msg := stderr.String(); msg != "" {
		err = fmt.Errorf("%w: %s", err, msg)
	}
	if exit.ExitCode() == ExitReject {
		return Reject(err)
	}
	return err
}

// tail keeps the last max bytes written to it.
type tail struct {
	max int
	buf []byte
	cut bool
}

func (t *tail) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.cut = true
	}
	return len(p), nil
}

// String returns what was kept, on one line.
func (t *tail) String() string {
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(t.buf), "?")), " ")
	if t.cut && s != "" {
		s = "…" + s
	}
	return s
}
