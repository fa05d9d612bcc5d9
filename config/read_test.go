package config

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadRefusesWhatNeverEnds loads sources from files whose read would
// block or never end: each is refused at once, with what it is, and a
// regular file of exactly MaxFileSize bytes still loads.
func TestReadRefusesWhatNeverEnds(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.toml")
	if err := os.Symlink(fifo, link); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.toml")
	if err := os.WriteFile(huge, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, 64<<20); err != nil { // sparse
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{fifo, "a FIFO, not a regular file"},
		{link, "a FIFO, not a regular file"},
		{"/dev/zero", "a character device, not a regular file"},
		{"/dev/urandom", "a character device, not a regular file"},
		{dir, "a directory, not a regular file"},
		{huge, "larger than 1048576 bytes"},
	} {
		start := time.Now()
		_, err := LoadSources(tc.path, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.path, err, tc.want)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("%s: took %s", tc.path, took)
		}
	}

	ok := filepath.Join(dir, "ok.toml")
	cfg := "[[source]]\nname = \"sume\"\nscheme = \"sume\"\n[[source.secret]]\nenv = \"X\"\n"
	cfg += "#" + strings.Repeat("x", MaxFileSize-len(cfg)-2) + "\n"
	if err := os.WriteFile(ok, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSources(ok, nil); err != nil {
		t.Errorf("a file of %d bytes: %v", len(cfg), err)
	}
}

// TestReadWithinAbandons gives up on a read that blocks past its time.
func TestReadWithinAbandons(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	start := time.Now()
	_, err := readWithin("c.toml", 50*time.Millisecond, func(string) ([]byte, error) {
		<-block
		return nil, nil
	})
	if err == nil || !strings.Contains(err.Error(), "not read within 50ms") {
		t.Fatalf("got %v, want not read within 50ms", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("took %s", took)
	}
}
