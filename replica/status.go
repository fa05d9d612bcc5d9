package replica

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Status is how the replica stands, as serve saves it after each sync for
// inbox stats and inbox alert (ReadStatus) and shows it on its console.
type Status struct {
	// URL is the replica as logs show it: no password, no secret.
	URL string `json:"url"`
	// Sync is --replica-sync: deliveries wait for the replica.
	Sync bool `json:"sync"`
	// At is when this status was taken.
	At time.Time `json:"at"`
	// Lag is, in seconds at At, how far the replica may trail the file:
	// every commit made before At minus Lag is on the replica.
	Lag float64 `json:"lag_seconds"`
	// Covered is when the last sync that reached the replica began, and
	// LastSuccess when it ended; zero before the first.
	Covered     time.Time `json:"covered,omitzero"`
	LastSuccess time.Time `json:"last_success,omitzero"`
	// Errors counts the syncs that failed since serve started; Error is
	// the last one's cause while the replica cannot be reached.
	Errors int64  `json:"errors"`
	Error  string `json:"error,omitempty"`
	// Stopped says serve stopped after a last sync that reached the
	// replica: it holds every commit.
	Stopped bool `json:"stopped,omitempty"`
}

// LagAt is how far the replica may trail the file at now: the saved lag
// grows with the time since the status was saved, unless serve stopped
// with everything sent (then 0).
func (s Status) LagAt(now time.Time) time.Duration {
	if s.Stopped {
		return 0
	}
	return time.Duration(s.Lag*float64(time.Second)) + max(now.Sub(s.At), 0)
}

// statusFile writes the status atomically (a temporary file renamed), so a
// reader never sees half of one. A write that fails is skipped: the next
// sync writes again.
type statusFile struct {
	path string
	mu   sync.Mutex
}

func (f *statusFile) write(st Status) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := json.Marshal(st)
	if err != nil {
		return
	}
	tmp := f.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return
	}
	os.Rename(tmp, f.path)
}

// ErrNoStatus is what ReadStatus returns when serve never replicated the
// database.
var ErrNoStatus = errors.New("no replica status: serve has not replicated this database (start it with --replica)")

// ReadStatus reads the status serve saved for the database at db. It fails
// with ErrNoStatus when there is none.
func ReadStatus(db string) (Status, error) {
	b, err := os.ReadFile(StatusPath(db))
	if errors.Is(err, fs.ErrNotExist) {
		return Status{}, ErrNoStatus
	}
	if err != nil {
		return Status{}, fmt.Errorf("read replica status: %w", err)
	}
	var st Status
	if err := json.Unmarshal(b, &st); err != nil {
		return Status{}, fmt.Errorf("read replica status %s: %w", filepath.Base(StatusPath(db)), err)
	}
	return st, nil
}

// scrub is err's text with every secret replaced, on one line.
func scrub(err error, secrets []string) string {
	s := err.Error()
	for _, secret := range secrets {
		if secret != "" {
			s = strings.ReplaceAll(s, secret, "REDACTED")
		}
	}
	return strings.Join(strings.Fields(s), " ")
}
