package receiver

import (
	"errors"
	"sync/atomic"
)

// DefaultBodyMemory is the Budget a handler given none has for itself, and
// serve's default for all of them: sixteen bodies of the default 4 MiB
// hard cap, or thousands of real deliveries of a few KiB.
const DefaultBodyMemory = 64 << 20

// smallBody is how much of one body counts as small: a body holds up to
// this much from the whole Budget, and more only from the part of it that
// small bodies leave (three quarters). Large bodies sent fast can then
// fill no more than that part, and real deliveries of a few KiB keep
// getting in beside them.
const smallBody = 64 << 10

// firstRead is the buffer a body starts in: a client that declares
// megabytes and sends nothing holds no more than this. The buffer grows
// as the bytes arrive.
const firstRead = 512

// wholeBody is the largest declared length whose buffer is made whole at
// once: such a body holds at most this much before it arrives, and is read
// without growing.
const wholeBody = 8 << 10

// errBodyMemory is a body the Budget cannot take: the answer is 503, as
// for requests beyond MaxInFlight.
var errBodyMemory = errors.New("bodies being received hold the whole body memory")

// Budget bounds the bytes that request bodies hold in memory at once,
// across every handler given the same one: a body takes its buffer from it
// as its bytes arrive, and gives it back once its request is answered. A
// body the Budget cannot take is answered 503 with Retry-After, before it
// is read when its declared length does not fit, else as soon as it
// outgrows what is left. It is safe for concurrent use.
type Budget struct {
	size int64
	used atomic.Int64
}

// NewBudget returns a Budget of size bytes; one of size zero or less takes
// nothing.
func NewBudget(size int64) *Budget { return &Budget{size: max(size, 0)} }

// Size returns the bytes the Budget holds in all.
func (b *Budget) Size() int64 { return b.size }

// Used returns the bytes bodies hold of it now.
func (b *Budget) Used() int64 { return b.used.Load() }

// Holds reports whether the Budget is at least twice n bytes, as it must be
// for a hard cap of n: a body that large then fits in the part large
// bodies may fill.
func (b *Budget) Holds(n int64) bool { return n <= b.size/2 }

// ceiling is how far a body that would hold n bytes may fill the Budget.
func (b *Budget) ceiling(n int64) int64 {
	if n <= smallBody {
		return b.size
	}
	return b.size - b.size/4
}

// fits reports whether a body of n bytes would fit now, taking nothing.
func (b *Budget) fits(n int64) bool { return b.used.Load()+n <= b.ceiling(n) }

// take takes n more bytes for a body that will then hold total bytes,
// and reports whether it could.
func (b *Budget) take(n, total int64) bool {
	ceiling := b.ceiling(total)
	for {
		used := b.used.Load()
		if used+n > ceiling {
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

// reservation is what one body holds of a Budget: its buffer's capacity.
type reservation struct {
	budget *Budget
	held   int64
}

// grow returns buf with capacity c, its bytes copied, taking what that
// adds from the budget before the new buffer is made. (The old one, given
// back, is garbage at once: a copy's moment is not worth counting twice.)
// It fails with errBodyMemory, buf left as it was, when the budget cannot
// take it.
func (r *reservation) grow(buf []byte, c int) ([]byte, error) {
	if !r.budget.take(int64(c-cap(buf)), int64(c)) {
		return buf, errBodyMemory
	}
	nb := make([]byte, len(buf), c)
	copy(nb, buf)
	r.held += int64(c - cap(buf))
	return nb, nil
}

// release gives back all the body holds: its buffer is no longer used.
func (r *reservation) release() {
	r.budget.used.Add(-r.held)
	r.held = 0
}
