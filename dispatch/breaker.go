package dispatch

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"inbox/inbox"
)

// The breaker tells a destination's outage from a row's poison. A failure
// is the destination's when it says so by itself (Down: no answer at all,
// a timeout, 429, 502, 503, 504, a command's exit 69 or 75), or when the
// same failure comes back for breakerRows different rows in a row with no
// success between them (an application answering 500 to everything).
// Then the destination is down: the attempt that failed is given back
// uncounted, no row is claimed, and one row at a time probes it, at an
// interval growing by half from firstProbe up to maxProbe (or as Retry-After
// asks, up to maxRetryAfter); the first success brings it up, at full
// speed. Any other failure is the row's: its attempt counts and it
// follows the retry schedule, and is parked handler_failed after its last.
const (
	breakerRows   = 3
	firstProbe    = 500 * time.Millisecond
	maxProbe      = time.Minute
	maxRetryAfter = time.Hour
)

// maxTracked bounds the rows the breaker remembers (suspects, deferred).
const maxTracked = 4096

// outage is an error that is the destination's, not the row's.
type outage struct {
	err   error
	after time.Duration // Retry-After; zero: none
	// reached: the request may have reached the application (a timeout),
	// so its attempt stays counted.
	reached bool
}

func (o *outage) Error() string { return o.err.Error() }
func (o *outage) Unwrap() error { return o.err }

// Down marks err as the destination's failure, not the row's: it cannot
// be reached, or it says it is overloaded or away. The attempt is given
// back uncounted and the destination is held until a probe succeeds, not
// before after (a Retry-After; zero for none, bounded by an hour).
func Down(err error, after time.Duration) error {
	return &outage{err: err, after: min(max(after, 0), maxRetryAfter)}
}

// IsDown reports whether err was made by Down.
func IsDown(err error) bool {
	var o *outage
	return errors.As(err, &o)
}

// timedOut marks err, an attempt's timeout, as the destination's outage
// whose request may have reached it: the attempt stays counted, yet the
// row is never parked for it.
func timedOut(err error) error {
	return &outage{err: err, after: retryAfter(err), reached: true}
}

// reached reports whether err, the destination's, is one whose request
// may have reached it (a timeout).
func reached(err error) bool {
	var o *outage
	return errors.As(err, &o) && o.reached
}

// retryAfter returns the Retry-After err carries, or zero.
func retryAfter(err error) time.Duration {
	var o *outage
	if errors.As(err, &o) {
		return o.after
	}
	return 0
}

// ParseRetryAfter reads a Retry-After header at now: seconds, or an HTTP
// date. It returns zero for none, one in the past, or one unreadable.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		return time.Duration(min(n, int64(maxRetryAfter/time.Second))) * time.Second
	}
	t, err := http.ParseTime(v)
	if err != nil || !t.After(now) {
		return 0
	}
	return min(t.Sub(now), maxRetryAfter)
}

// verdict is what the breaker makes of a failed attempt.
type verdict int

const (
	// verdictRow: the failure is the row's; its attempt counts.
	verdictRow verdict = iota
	// verdictDown: the destination's; the attempt is given back uncounted.
	verdictDown
	// verdictUnsure: the row's last attempt failed as others just did;
	// given back uncounted once, so that an outage beginning does not
	// park it.
	verdictUnsure
)

// breaker is one destination's: whether it is down, since when, and when
// to probe it next. Its methods are safe for concurrent use.
type breaker struct {
	mu       sync.Mutex
	since    time.Time // down since; zero while up
	cause    string
	next     time.Time // no probe before
	interval time.Duration
	probe    string // the row probing now; "" for none
	probes   int    // probes failed since down
	tripper  string // the row whose failure brought it down
	// tripKind is the failure that brought it down when it was one the
	// destination answered (the same for several rows); "" when it did
	// not answer at all (Down, a timeout).
	tripKind string
	// streak is the rows that failed in a row, with the same failure
	// (kind), since the last success.
	streak []string
	kind   string
	// suspects are rows that brought the destination down, after which
	// the next probe (another row) succeeded: their next failure is their
	// own. deferred are rows whose last attempt was given back once
	// (verdictUnsure).
	suspects, deferred map[string]bool
	// answered counts the successes: whether the destination answered
	// since a given moment (see watchDown).
	answered uint64
}

func newBreaker() *breaker {
	return &breaker{suspects: map[string]bool{}, deferred: map[string]bool{}}
}

// errDown is why no delivery is attempted while the destination is down
// and no probe is due.
var errDown = errors.New("destination down")

// ready returns nil when an attempt may start at now: the destination is
// up, or a probe is due and none under way.
func (b *breaker) ready(now time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.since.IsZero() || (b.probe == "" && !now.Before(b.next)) {
		return nil
	}
	return fmt.Errorf("%w: %s", errDown, b.cause)
}

// admit reports whether the attempt of row id may be sent at now: always
// while up; while down, as the one probe when one is due.
func (b *breaker) admit(id string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.since.IsZero() {
		return true
	}
	if b.probe != "" || now.Before(b.next) {
		return false
	}
	b.probe = id
	return true
}

// down returns since when the destination is down (zero while up), why,
// and whether a probe is due at now.
func (b *breaker) down(now time.Time) (since time.Time, cause string, probeDue bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.since, b.cause, !b.since.IsZero() && b.probe == "" && !now.Before(b.next)
}

// succeeded records that row id was delivered at now: the destination is
// up. It reports whether it was down.
func (b *breaker) succeeded(id string) (wasDown bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.answered++
	b.streak, b.kind = b.streak[:0], ""
	delete(b.deferred, id)
	delete(b.suspects, id)
	if b.since.IsZero() {
		return false
	}
	if b.probes == 0 && b.tripper != "" && b.tripper != id {
		// The row that brought it down failed alone: the next row
		// went through at once.
		remember(b.suspects, b.tripper)
	}
	b.since, b.cause, b.probe, b.probes, b.tripper = time.Time{}, "", "", 0, ""
	return true
}

// refused records that row id's attempt was refused (Reject, TooLarge):
// an answer of the destination's about the row, never the failure that
// brought it down. When id was the probe the destination is up, and
// answered reports so; the refusal stays the row's, outside the streak.
func (b *breaker) refused(id string) (up bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.since.IsZero() || id != b.probe {
		return false
	}
	b.answers()
	return true
}

// answers brings the destination up: its probe got an answer that is the
// row's, not the destination's.
func (b *breaker) answers() {
	b.since, b.cause, b.probe, b.probes, b.tripper, b.tripKind = time.Time{}, "", "", 0, "", ""
	b.streak, b.kind = b.streak[:0], ""
}

// failed decides whose the failure err of j's attempt at now is, and
// returns the verdict, and with verdictDown when the row is due again.
// tripped reports that the destination went down with it; up, that it
// came up with it: a probe that got an answer other than the one that
// brought it down (the destination answers again; the failure is the
// probing row's own).
func (b *breaker) failed(j inbox.Job, err error, last bool, now time.Time) (v verdict, due time.Time, tripped, up bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	after := retryAfter(err)
	if !b.since.IsZero() && j.ID == b.probe && !IsDown(err) && failureKind(err) != b.tripKind {
		b.answers()
		up = true
	}
	if !b.since.IsZero() {
		// A probe, or an attempt under way when it went down: still down.
		if j.ID == b.probe {
			b.probe = ""
			b.probes++
			b.interval = min(b.interval*3/2, maxProbe)
			b.next = now.Add(max(b.interval, after))
			b.cause = errorText(err)
		}
		due := now.Add(after)
		if b.next.After(due) {
			due = b.next
		}
		return verdictDown, due, false, false
	}
	if IsDown(err) && !b.suspects[j.ID] {
		b.trip(j.ID, err, now, after)
		return verdictDown, b.next, true, up
	}
	k := failureKind(err)
	if k != b.kind {
		b.streak, b.kind = b.streak[:0], k
	}
	if !contains(b.streak, j.ID) {
		b.streak = append(b.streak, j.ID)
	}
	switch {
	case len(b.streak) >= breakerRows && !b.suspects[j.ID]:
		b.trip(j.ID, err, now, after)
		return verdictDown, b.next, true, up
	case last && len(b.streak) > 1 && !b.deferred[j.ID]:
		remember(b.deferred, j.ID)
		return verdictUnsure, time.Time{}, false, up
	}
	return verdictRow, time.Time{}, false, up
}

// successes returns how many attempts have succeeded.
func (b *breaker) successes() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.answered
}

// resume starts the breaker down since since, for cause, a probe due at
// once: what a dispatcher that stopped while it was down had recorded.
func (b *breaker) resume(since time.Time, cause string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.since, b.cause, b.interval, b.next = since, cause, firstProbe, time.Time{}
	b.tripKind = cause
}

// trip brings the destination down at now, for row id's failure err.
func (b *breaker) trip(id string, err error, now time.Time, after time.Duration) {
	b.since, b.cause, b.tripper, b.probes, b.probe = now, errorText(err), id, 0, ""
	b.tripKind = ""
	if !IsDown(err) {
		b.tripKind = failureKind(err)
	}
	b.interval = firstProbe
	b.next = now.Add(max(b.interval, after))
	b.streak, b.kind = b.streak[:0], ""
}

// failureKind names err's failure for telling "the same failure": its
// text, word for word, with what the application said ("HTTP 500
// Internal Server Error: database unavailable", "exit status 1: ..."). An
// application down answers every row alike; one that a row breaks tends
// to name the row, or what in it failed.
func failureKind(err error) string { return errorText(err) }

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// remember adds id to m, forgetting all when it grew past maxTracked.
func remember(m map[string]bool, id string) {
	if len(m) >= maxTracked {
		clear(m)
	}
	m[id] = true
}
