package receiver

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// MinBodyRate is the pace a body must keep once BodyTimeout has passed:
// every MinBodyRate bytes received give it one more second, up to the read
// timeout. A real delivery is a few KiB sent at once and is in long before
// BodyTimeout; a large one on a slow link still keeps well above this.
const MinBodyRate = 64 << 10 // bytes a second

// deadlineStep is how far the body's deadline must move before it is set
// again: each read need not reset it.
const deadlineStep = 100 * time.Millisecond

// readBody reads r's body, at most limit bytes, into a buffer it takes
// from res as the bytes arrive, under the body's deadline when timeout is
// positive: the body must be in by timeout after the headers, plus a
// second for every MinBodyRate bytes received, and never later than the
// deadline net/http set for the whole request. A declared length above the
// limit is refused before anything is read, and so is one the budget
// cannot take now. It fails with errTooLarge, errBodyMemory, errSlowBody
// when the body fell behind its deadline, or errRead.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, timeout time.Duration, res *reservation) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, errTooLarge
	}
	// The buffer ends one byte past what may come, to see EOF (or a body
	// past the limit) without growing.
	end := limit + 1
	if r.ContentLength >= 0 {
		end = r.ContentLength + 1
		if !res.budget.fits(end) {
			return nil, errBodyMemory
		}
	}
	first := min(end, firstRead)
	if r.ContentLength >= 0 && end <= wholeBody {
		// A small declared body, as nearly every delivery is, is read into
		// one buffer rather than grown into two or three.
		first = end
	}
	buf, err := res.grow(nil, int(first))
	if err != nil {
		return nil, err
	}
	src := io.Reader(r.Body)
	var p *pacer
	if timeout > 0 {
		p = newPacer(w, r, timeout)
		defer p.restore()
		src = p
	}
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > limit {
				return nil, errTooLarge
			}
			// Doubling, up to the declared length: a body that is longer
			// than it declares (not one net/http passes on) grows on to the
			// limit.
			next := min(2*int64(cap(buf)), limit+1)
			if c := int64(cap(buf)); c < end {
				next = min(next, end)
			}
			if buf, err = res.grow(buf, int(next)); err != nil {
				return nil, err
			}
		}
		n, err := src.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case err == io.EOF:
			return buf, nil
		case err != nil && p != nil && p.fellBehind(err):
			return nil, fmt.Errorf("%w: %d bytes in %s", errSlowBody, len(buf), time.Since(p.start).Round(time.Millisecond))
		case err != nil:
			return nil, fmt.Errorf("%w: %w", errRead, err)
		}
	}
}

// pacer reads a request's body under a read deadline that grows with what
// has arrived, so that a body which stalls or trickles (one byte a second,
// headers and then nothing, a large Content-Length and a trickle, chunks
// that dribble in) is given up after timeout rather than after the read
// timeout. The deadline is the connection's, so it bounds every byte read,
// chunk framing included.
type pacer struct {
	rc      *http.ResponseController
	body    io.Reader
	start   time.Time
	timeout time.Duration
	// limit is net/http's deadline for the whole request, which the pacer
	// never goes past and gives back when done; zero when the request did
	// not come through Serve, and it is not known.
	limit time.Time
	set   time.Time // the deadline last set; zero before the first read
	n     int64
}

func newPacer(w http.ResponseWriter, r *http.Request, timeout time.Duration) *pacer {
	limit, _ := requestDeadline(r)
	return &pacer{rc: http.NewResponseController(w), body: r.Body, start: time.Now(), timeout: timeout, limit: limit}
}

// deadline is when the body must have arrived, given what has.
func (p *pacer) deadline() time.Time {
	d := p.start.Add(p.timeout + time.Duration(p.n)*time.Second/MinBodyRate)
	if !p.limit.IsZero() && d.After(p.limit) {
		d = p.limit
	}
	return d
}

func (p *pacer) Read(b []byte) (int, error) {
	if d := p.deadline(); p.set.IsZero() || d.Sub(p.set) >= deadlineStep || (d.Equal(p.limit) && d.After(p.set)) {
		// A ResponseWriter that cannot (a test's recorder) leaves the body
		// unpaced.
		p.rc.SetReadDeadline(d)
		p.set = d
	}
	n, err := p.body.Read(b)
	p.n += int64(n)
	return n, err
}

// fellBehind reports whether err is the pacer's own deadline passing,
// rather than the read timeout's or another failure.
func (p *pacer) fellBehind(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded) && (p.limit.IsZero() || p.set.Before(p.limit))
}

// restore gives the connection back the deadline net/http set: once the
// body is in, net/http reads on in the background to see the client go
// away, and the pacer's deadline passing there would cancel the request
// while it is being stored.
func (p *pacer) restore() {
	p.rc.SetReadDeadline(p.limit)
}
