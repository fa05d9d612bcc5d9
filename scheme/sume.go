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

// Verify checks a Sume delivery: sume.Check for the header's form and the
// timestamp's freshness, then the MACs against every live secret, as every
// scheme does. It returns sume's errors.
func (s Sume) Verify(h http.Header, body []byte, secrets []Secret, now time.Time) (Verified, error) {
	ts, _ := single(h, sume.HeaderTimestamp)
	sig := strings.Join(h.Values(sume.HeaderSignature), ",")
	at, macs, err := sume.Check(ts, sig, s.Tolerance, now)
	if err != nil {
		return Verified{}, err
	}
	i, err := match(secrets, now, macs, func(key []byte) []byte { return sume.Sign(string(key), ts, body) })
	if err != nil {
		return Verified{}, sume.ErrMismatch
	}
	return Verified{TS: at, Signed: true, Secret: i}, nil
}
