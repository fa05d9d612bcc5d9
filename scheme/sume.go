package scheme

import (
	"net/http"
	"strings"
	"time"

	"inbox/sume"
)

// Sume is Sume's scheme (package sume), under Tolerance either way.
type Sume struct {
	Tolerance time.Duration
}

// Name returns "sume".
func (Sume) Name() string { return "sume" }

// Verify checks a Sume delivery with sume.Verify, one live secret at a time
// so the matching one is known, and returns sume's errors.
func (s Sume) Verify(h http.Header, body []byte, secrets []Secret, now time.Time) (Verified, error) {
	ts, _ := single(h, sume.HeaderTimestamp)
	sig := strings.Join(h.Values(sume.HeaderSignature), ",")
	found := Verified{Secret: -1}
	var first error
	for i, sec := range secrets {
		if !sec.Live(now) {
			continue
		}
		at, err := sume.Verify(ts, sig, body, []string{string(sec.Key)}, s.Tolerance, now)
		switch {
		case err == nil && found.Secret < 0:
			found = Verified{TS: at, Secret: i}
		case err != nil && first == nil:
			first = err
		}
	}
	if found.Secret >= 0 {
		return found, nil
	}
	if first == nil {
		first = sume.ErrMismatch // every secret expired
	}
	return Verified{}, first
}
