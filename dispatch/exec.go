package dispatch

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
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
)

// ExitReject is the exit status with which a command says a job must never
// be retried: EX_DATAERR from sysexits.h ("the input data was incorrect").
// The row is parked handler_rejected at once. Exit 0 is success; any other
// status, a signal or the timeout is retried.
const ExitReject = 65

// The exit statuses with which a command says that what it hands the job
// to is down, not the job: EX_UNAVAILABLE ("a service is unavailable")
// and EX_TEMPFAIL ("try again later") from sysexits.h. The attempt is
// given back uncounted and the destination held, probed until it is back
// (see Down), as after the timeout.
const (
	ExitUnavailable = 69
	ExitTempFail    = 75
)

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
	// keys. A variable is withheld, whatever its name, when its value, or
	// its value percent-decoded (a password in a URL), is or holds any form
	// of one (see secretForms): the secret, a whsec_ secret's base64 body
	// and its key, and each of those in standard or URL-safe base64, padded
	// or not, and in hex of either case. A form shorter than minContained
	// bytes withholds only a value equal to it.
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
	forms := secretForms(w.Secrets)
	var env []string
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "INBOX_") || strings.HasPrefix(name, "SUME_") ||
			slices.Contains(w.Names, name) || holdsSecret(value, forms) {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// secretForms returns every form of each secret a variable may carry it
// in: the secret as given; for a whsec_ secret, the base64 after the
// prefix (libraries accept it so) and the key it decodes to, whichever of
// the four base64 alphabets and paddings it was written in; and each of
// those encoded in standard and URL-safe base64, padded and not, and in
// lower- and uppercase hex. Empty forms are left out.
func secretForms(secrets []string) map[string]bool {
	forms := map[string]bool{}
	for _, s := range secrets {
		bases := []string{s}
		if body, ok := strings.CutPrefix(strings.TrimSpace(s), "whsec_"); ok {
			bases = append(bases, body)
			if key, ok := decodeBase64(body); ok {
				bases = append(bases, string(key))
			}
		}
		for _, b := range bases {
			if b == "" {
				continue
			}
			for _, f := range []string{
				b,
				base64.StdEncoding.EncodeToString([]byte(b)),
				base64.RawStdEncoding.EncodeToString([]byte(b)),
				base64.URLEncoding.EncodeToString([]byte(b)),
				base64.RawURLEncoding.EncodeToString([]byte(b)),
				hex.EncodeToString([]byte(b)),
				strings.ToUpper(hex.EncodeToString([]byte(b))),
			} {
				forms[f] = true
			}
		}
	}
	return forms
}

// decodeBase64 decodes s in whichever of the standard and URL-safe
// alphabets, padded or not, it is written in.
func decodeBase64(s string) ([]byte, bool) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil && len(b) > 0 {
			return b, true
		}
	}
	return nil, false
}

// holdsSecret reports whether value is or holds one of forms: as it is,
// trimmed, whsec_-decoded, or percent-decoded (up to three times, for a
// password in a URL encoded twice).
func holdsSecret(value string, forms map[string]bool) bool {
	if len(forms) == 0 {
		return false
	}
	candidates := []string{value, strings.TrimSpace(value)}
	if body, ok := strings.CutPrefix(strings.TrimSpace(value), "whsec_"); ok {
		if key, ok := decodeBase64(body); ok {
			candidates = append(candidates, string(key))
		}
	}
	for v, i := value, 0; i < 3; i++ {
		d := percentDecode(v)
		if d == v {
			break
		}
		candidates = append(candidates, d, strings.TrimSpace(d))
		v = d
	}
	for _, v := range candidates {
		if forms[v] {
			return true
		}
		for f := range forms {
			if len(f) >= minContained && strings.Contains(v, f) {
				return true
			}
		}
	}
	return false
}

// percentDecode replaces each %XX of s (two hex digits) by its byte and
// leaves everything else, a lone % too, as it is: unlike url.PathUnescape
// it never fails, so one stray % cannot hide a secret beside it.
func percentDecode(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			v, _ := hex.DecodeString(s[i+1 : i+3])
			b.WriteByte(v[0])
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isHex(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
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
	switch exit.ExitCode() {
	case ExitReject:
		return Reject(err)
	case ExitUnavailable, ExitTempFail:
		return Down(err, 0)
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
