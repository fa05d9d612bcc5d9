package dispatch

import "time"

// Retry is a destination's retry policy for the failures that are the
// row's own: how long to wait before the next attempt, and whether an
// attempt is the row's last. The destination's outages (see breaker) use
// none of it.
type Retry struct {
	waits []time.Duration
}

// NewRetry returns the policy that waits waits[i] after the (i+1)th failed
// attempt and parks the row after the failure of attempt len(waits)+1.
func NewRetry(waits []time.Duration) Retry { return Retry{waits: waits} }

// Retries reports whether a failed attempt may be followed by another at
// all ("none" has none).
func (r Retry) Retries() bool { return len(r.waits) > 0 }

// Attempts is how many attempts a row gets: the last is attempt number
// Attempts.
func (r Retry) Attempts() int { return len(r.waits) + 1 }

// Last reports whether attempt (from 1) is the row's last, or past it (the
// last one's outcome lost to a crash, or the schedule cut short since).
func (r Retry) Last(attempt int) bool { return attempt > len(r.waits) }

// Wait returns how long to wait after attempt failed; its last wait for an
// attempt at or past the last.
func (r Retry) Wait(attempt int) time.Duration {
	if len(r.waits) == 0 {
		return 0
	}
	return r.waits[min(max(attempt, 1), len(r.waits))-1]
}
