package scheme

import (
	"errors"
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
// timestamp's freshness, then the MACs of "<timestamp>.<body>" against
// every live secret, in constant time, as every scheme does. It is the one
// Sume verifier. Its errors read as sume's and are this package's too
// (errors.Is holds for both: sume.ErrMismatch and ErrMismatch).
func (s Sume) Verify(h http.Header, body []byte, secrets []Secret, now time.Time) (Verified, error) {
	ts, _ := single(h, sume.HeaderTimestamp)
	sig := strings.Join(h.Values(sume.HeaderSignature), ",")
	at, macs, err := sume.Check(ts, sig, s.Tolerance, now)
	if err != nil {
		return Verified{}, sumeError(err)
	}
	i, err := match(secrets, now, macs, func(key []byte) []byte { return sume.Sign(string(key), ts, body) })
	if err != nil {
		return Verified{}, sumeError(sume.ErrMismatch)
	}
	return Verified{TS: at, Signed: true, Secret: i}, nil
}

// sumeError returns sume's verification failure err as the scheme error
// of the same cause, reading as sume's.
func sumeError(err error) error {
	for _, pair := range [][2]error{
		{sume.ErrNoSignature, ErrNoSignature},
		{sume.ErrMalformedSignature, ErrMalformedSignature},
		{sume.ErrBadTimestamp, ErrBadTimestamp},
		{sume.ErrStaleTimestamp, ErrStaleTimestamp},
		{sume.ErrMismatch, ErrMismatch},
	} {
		if errors.Is(err, pair[0]) {
			return &both{err: err, as: pair[1]}
		}
	}
	return err
}

// both is a provider's error that is also a scheme error: its text is the
// provider's, and errors.Is matches either.
type both struct{ err, as error }

func (e *both) Error() string   { return e.err.Error() }
func (e *both) Unwrap() []error { return []error{e.err, e.as} }
