package e2e

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDurationFlagsQuoteTheText checks that every duration flag refuses a
// bad value in an error that quotes it as the operator typed it
// (--busy-timeout "0.5ms", not 500µs), on the command line and through its
// variable, before anything is opened or bound; and that --help shows the
// defaults as a duration.
func TestDurationFlagsQuoteTheText(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inbox.db")
	serve := []string{"serve", "--db", db, "--addr", "127.0.0.1:0"}
	forward := slices.Concat(serve, []string{"--forward-url", "http://127.0.0.1:1/"})
	secret := []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=s"}
	tests := []struct {
		env  []string
		args []string
		want string
	}{
		{secret, slices.Concat(serve, []string{"--tolerance", "0.0s"}), `--tolerance "0.0s": want a positive duration`},
		{secret, slices.Concat(serve, []string{"--busy-timeout", "0.5ms"}), `--busy-timeout "0.5ms": want a positive duration of at least 1ms`},
		{slices.Concat(secret, []string{"INBOX_BUSY_TIMEOUT=0.5ms"}), serve, `--busy-timeout "0.5ms": want a positive duration of at least 1ms`},
		{secret, slices.Concat(serve, []string{"--busy-timeout", "9000ms"}), `--busy-timeout "9000ms": a delivery that waits that long`},
		{secret, slices.Concat(serve, []string{"--read-header-timeout", "0.0s"}), `--read-header-timeout "0.0s": want a positive duration`},
		{secret, slices.Concat(serve, []string{"--read-timeout", "0.5s"}), `--read-timeout "0.5s"`},
		{secret, slices.Concat(serve, []string{"--body-timeout", "0.0s"}), `--body-timeout "0.0s": want a positive duration`},
		{secret, slices.Concat(serve, []string{"--body-timeout", "9000ms"}), `--body-timeout "9000ms": want 0 < body timeout <= --read-timeout "8s"`},
		{secret, slices.Concat(serve, []string{"--poll-every", "0.0s"}), `--poll-every "0.0s": want a positive duration`},
		{secret, slices.Concat(serve, []string{"--poll-backoff", "-0.5s"}), `--poll-backoff "-0.5s": want a positive duration`},
		{secret, slices.Concat(forward, []string{"--slow-after", "-0.5s"}), `--slow-after "-0.5s": want 0 or more`},
		{secret, slices.Concat(forward, []string{"--timeout", "-1.5s"}), `--timeout "-1.5s": want 0 or more`},
		{secret, slices.Concat(forward, []string{"--lease", "-1.5m"}), `--lease "-1.5m": want 0 or more`},
		{secret, slices.Concat(forward, []string{"--timeout", "1.5x"}), `--timeout "1.5x": want a duration`},
		{nil, []string{"dispatch", "--db", db, "--busy-timeout", "0.5ms", "--forward-url", "http://127.0.0.1:1/"}, `--busy-timeout "0.5ms": want a positive duration of at least 1ms`},
		{nil, []string{"dispatch", "--db", db, "--forward-url", "http://127.0.0.1:1/", "--lease", "-0.5m"}, `--lease "-0.5m": want 0 or more`},
		{nil, []string{"reprocess", "--db", db, "--busy-timeout", "0.5ms", "--all"}, `--busy-timeout "0.5ms": want a positive duration of at least 1ms`},
		{nil, []string{"purge", "--db", db, "--busy-timeout", "-1000ms", "--older-than", "30d"}, `--busy-timeout "-1000ms": want a positive duration of at least 1ms`},
		{nil, []string{"alert", "--db", db, "--notify-timeout", "0.0s"}, `--notify-timeout "0.0s": want a positive duration`},
		{nil, []string{"list", "--db", db, "--timeout", "0.0s"}, `--timeout "0.0s": want a positive duration`},
	}
	for _, tt := range tests {
		stderr, code := refusedAtStart(t, tt.env, tt.args...)
		if code == 0 || !strings.Contains(stderr, tt.want) {
			t.Errorf("%s %v: exit %d, stderr %q, want an error quoting %q", strings.Join(tt.env, " "), tt.args, code, stderr, tt.want)
		}
	}
	for _, tt := range []struct {
		cmd  string
		want []string
	}{
		{"serve", []string{"--tolerance value", "(default: 5m0s) [$INBOX_TOLERANCE]", "(default: 3s) [$INBOX_BUSY_TIMEOUT]", "(default: 2s) [$INBOX_BODY_TIMEOUT]", "(default: 0: fit the destination) [$INBOX_SLOW_AFTER]"}},
		{"list", []string{"--timeout value", `(default: "30s") [$INBOX_QUERY_TIMEOUT]`}},
		{"alert", []string{"(default: 10s) [$INBOX_NOTIFY_TIMEOUT]"}},
	} {
		out, _, _ := runCLI(t, nil, tt.cmd, "--help")
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s --help lacks %q", tt.cmd, w)
			}
		}
	}
}
