package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY returns both ends of a new pseudo-terminal.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slave.Close() })
	return master, slave
}

// TestLoggerOutput checks that logs are JSON lines unless they go to a
// terminal, where they are readable, and that --log-level filters.
func TestLoggerOutput(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger(&buf, "warn")
	if err != nil {
		t.Fatal(err)
	}
	log.Info().Msg("hidden")
	log.Warn().Str("outcome", "rejected").Msg("shown")
	if got := buf.String(); strings.Contains(got, "hidden") || !strings.HasPrefix(got, `{"level":"warn","outcome":"rejected"`) {
		t.Errorf("to a buffer at warn: %q, want one JSON line", got)
	}

	file, err := os.Create(t.TempDir() + "/log")
	if err != nil {
		t.Fatal(err)
	}
	log, _ = newLogger(file, "info")
	log.Info().Msg("to a file")
	if b, _ := os.ReadFile(file.Name()); !bytes.HasPrefix(b, []byte(`{"level":"info"`)) {
		t.Errorf("to a file: %q, want JSON", b)
	}

	master, slave := openPTY(t)
	log, _ = newLogger(slave, "info")
	log.Info().Str("outcome", "stored").Msg("to a terminal")
	master.SetReadDeadline(time.Now().Add(2 * time.Second))
	b := make([]byte, 4096)
	n, err := master.Read(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b[:n]); strings.HasPrefix(got, "{") || !strings.Contains(got, "INF") || !strings.Contains(got, "to a terminal") {
		t.Errorf("to a terminal: %q, want a readable line", got)
	}

	for _, bad := range []string{"", "loud"} {
		if _, err := newLogger(&buf, bad); err == nil {
			t.Errorf("level %q accepted", bad)
		}
	}
}
