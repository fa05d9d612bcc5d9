package config

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"inbox/scheme"
)

// DefaultTolerance is how far a signed timestamp may be from now, either
// way, for a source that sets no tolerance (and serve's --tolerance).
const DefaultTolerance = 5 * time.Minute

// newScheme is the registry of schemes: it turns the scheme fs names into
// src.Scheme, under fs's tolerance, with what the scheme fixes of src (Vibe
// its limit, its events and its answer; Sume its events), and returns how
// the scheme reads a configured secret into its key. It fails on an
// unknown scheme, a tolerance that is not a positive duration and options
// the scheme refuses.
func newScheme(fs fileSource, src *Source) (key func(string) ([]byte, error), err error) {
	tol := DefaultTolerance
	if fs.Tolerance != "" {
		if tol, err = time.ParseDuration(fs.Tolerance); err != nil || tol <= 0 {
			return nil, fmt.Errorf("tolerance %q: want a positive duration", fs.Tolerance)
		}
	}
	key = func(s string) ([]byte, error) { return []byte(s), nil }
	switch fs.Scheme {
	case "sume":
		src.Scheme = scheme.Sume{Tolerance: tol}
		if len(src.Rules.Events) == 0 {
			src.Rules.Events = []string{"job.completed", "job.failed", "job.canceled"}
		}
	case "vibe":
		// Vibe's contract fixes the limit, the freshness and the answer.
		for _, id := range fs.JobIDs {
			if id == "" {
				return nil, errors.New("job_ids: an empty jobId")
			}
		}
		src.Scheme = scheme.Vibe{JobIDs: fs.JobIDs} // under VibeTolerance
		src.HardCap, src.Rules.MaxBody = scheme.VibeMaxBody, 0
		if fs.Status != 0 && fs.Status != http.StatusAccepted {
			return nil, errors.New("vibe answers 202: leave status out")
		}
		src.Accepted = http.StatusAccepted
		key = scheme.VibeKey
	case "standard-webhooks":
		src.Scheme, key = scheme.StandardWebhooks{Tolerance: tol}, scheme.StandardVerifyKey
	case "stripe":
		src.Scheme = scheme.Stripe{Tolerance: tol}
	case "github":
		src.Scheme = scheme.GitHub{}
	case "hmac":
		h := fs.HMAC
		if h.TimestampHeader == "" {
			tol = 0
		}
		if src.Scheme, err = scheme.NewHMAC(scheme.HMACOptions{Header: h.Header, Prefix: h.Prefix, Encoding: h.Encoding,
			TimestampHeader: h.TimestampHeader, Tolerance: tol, KeyField: h.KeyField, KeyHeader: h.KeyHeader,
			KeyFrom: h.KeyFrom, EventField: h.EventField, EventHeader: h.EventHeader}); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("scheme %q: want sume, vibe, standard-webhooks, stripe, github or hmac", fs.Scheme)
	}
	return key, nil
}
