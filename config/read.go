package config

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"
)

// MaxFileSize is the largest configuration file read: 1 MiB, far more
// than any set of [[source]] and [[destination]] tables needs, and small
// enough that a --config pointing at /dev/zero or a huge file is refused
// rather than read into memory.
const MaxFileSize = 1 << 20

// ReadTimeout is how long reading the configuration file may take: a read
// that blocks longer (a hung network mount) is abandoned, and the start,
// the reload or the command that read it fails.
const ReadTimeout = 5 * time.Second

// readFile reads the configuration file at path within ReadTimeout, as
// readRegular does. A read that does not end in time is left to finish on
// its own (a read blocked in the kernel cannot be taken back) and its
// result is dropped; the caller is not held up by it.
func readFile(path string) ([]byte, error) {
	return readWithin(path, ReadTimeout, readRegular)
}

// readWithin runs read(path) and returns what it returns, or an error once
// within has passed without it.
func readWithin(path string, within time.Duration, read func(string) ([]byte, error)) ([]byte, error) {
	type result struct {
		b   []byte
		err error
	}
	// Buffered: an abandoned read still ends without a receiver.
	done := make(chan result, 1)
	go func() {
		b, err := read(path)
		done <- result{b, err}
	}()
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.b, r.err
	case <-timer.C:
		return nil, fmt.Errorf("not read within %s (a hung mount?): abandoned", within)
	}
}

// readRegular reads the file at path, following symbolic links, when it is
// a regular file of at most MaxFileSize bytes. It opens without blocking
// (a FIFO's open would wait for a writer) and checks the file it opened,
// not the name, so a link swapped between a check and the open cannot slip
// a FIFO or a device in: those never end or never fill up, and are
// refused.
func readRegular(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s, not a regular file: want a file of at most %d bytes", kindOf(fi.Mode()), MaxFileSize)
	}
	if fi.Size() > MaxFileSize {
		return nil, errTooLarge
	}
	// The file may have grown since fstat.
	b, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxFileSize {
		return nil, errTooLarge
	}
	return b, nil
}

// errTooLarge is a configuration file over MaxFileSize.
var errTooLarge = fmt.Errorf("larger than %d bytes (1 MiB), the most a config is read", MaxFileSize)

// kindOf names the kind of file mode is of, for an error.
func kindOf(mode fs.FileMode) string {
	switch {
	case mode.IsDir():
		return "a directory"
	case mode&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case mode&fs.ModeCharDevice != 0:
		return "a character device"
	case mode&fs.ModeDevice != 0:
		return "a block device"
	case mode&fs.ModeSocket != 0:
		return "a socket"
	}
	return "an irregular file"
}
