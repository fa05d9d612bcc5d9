package receiver

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"inbox/inbox"
	"inbox/scheme"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
	"inbox/sume"
)

// pacedEnv serves a real handler with bodyTimeout through Serve under lim,
// on a free port, until the test ends.
func pacedEnv(t *testing.T, lim Limits, bodyTimeout time.Duration) (*Handler, *sqlite.Store, string) {
	t.Helper()
	store := sqlitetest.MustOpen(t, sqlite.Options{})
	h, err := NewHandler(store, Config{
		Keys:        keys(testSecret),
		Scheme:      scheme.Sume{Tolerance: 5 * time.Minute},
		Rules:       inbox.Rules{Events: []string{"job.completed"}, MaxBody: 2 << 20},
		HardCap:     4 << 20,
		MaxInFlight: 1,
		BodyTimeout: bodyTimeout,
		Now:         func() time.Time { return testNow },
	}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, lim, zerolog.Nop(), Endpoint{Name: "webhooks", Listener: ln, Handler: h}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return h, store, ln.Addr().String()
}

// signedHead returns a request line and headers for a signed delivery of
// body, with the framing header given (Content-Length or chunked).
func signedHead(body, framing string) string {
	ts := strconv.FormatInt(testNow.Unix(), 10)
	return "POST /webhooks/sume HTTP/1.1\r\nHost: inbox.test\r\n" +
		sume.HeaderTimestamp + ": " + ts + "\r\n" +
		sume.HeaderSignature + ": " + sume.SignatureHeader(ts, []byte(body), testSecret) + "\r\n" +
		framing + "\r\n\r\n"
}

// exchange dials addr, writes head, then runs send on the connection while
// it waits for the answer; it returns the answer's status (0 when the
// server closed without one) and how long after the head it came.
func exchange(t *testing.T, addr, head string, send func(c net.Conn)) (int, time.Duration) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	go send(c)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	took := time.Since(start)
	if err != nil {
		return 0, took
	}
	resp.Body.Close()
	return resp.StatusCode, took
}

// drip writes s a piece at a time, every tick, until it is sent or the
// connection fails.
func drip(s string, piece int, tick time.Duration) func(net.Conn) {
	return func(c net.Conn) {
		for len(s) > 0 {
			n := min(piece, len(s))
			if _, err := io.WriteString(c, s[:n]); err != nil {
				return
			}
			s = s[n:]
			time.Sleep(tick)
		}
	}
}

// padded is a delivery of job id padded with n bytes. The pad needs no
// quoting: %q would take most of a second over megabytes.
func padded(id string, n int) string {
	return fmt.Sprintf(`{"event":"job.completed","job_id":%q,"status":"COMPLETED","pad":"%s"}`, id, strings.Repeat("x", n))
}

// TestSlowBodyGivenUp stalls bodies in every way a client can (a byte at a
// time, headers then nothing, a large Content-Length then a trickle, chunks
// that trickle) and checks each is answered 408 once the body timeout has
// passed, far before the read timeout, holds no place in MaxInFlight
// meanwhile, and stores nothing. Each way has a server of its own, so that
// they stall side by side.
func TestSlowBodyGivenUp(t *testing.T) {
	t.Parallel()
	const bodyTimeout = 300 * time.Millisecond
	lim := DefaultLimits()
	lim.ReadTimeout, lim.WriteTimeout = 5*time.Second, 6*time.Second
	body := completed
	nothing := func(net.Conn) {}
	for _, tt := range []struct {
		name    string
		framing string
		send    func(net.Conn)
	}{
		{"a byte every 100ms", "Content-Length: " + strconv.Itoa(len(body)), drip(body, 1, 100*time.Millisecond)},
		{"headers, then nothing", "Content-Length: " + strconv.Itoa(len(body)), nothing},
		{"half the body, then nothing", "Content-Length: " + strconv.Itoa(len(body)), drip(body[:len(body)/2], len(body), time.Hour)},
		{"4 MiB declared, a trickle", "Content-Length: " + strconv.Itoa(4<<20), drip(strings.Repeat(" ", 100), 1, 50*time.Millisecond)},
		{"chunked, a byte a chunk", "Transfer-Encoding: chunked", drip(strings.Repeat("1\r\n \r\n", 100), 6, 100*time.Millisecond)},
		{"chunked, a chunk's size line a byte at a time", "Transfer-Encoding: chunked", drip("000000000000000000001", 1, 100*time.Millisecond)},
		{"chunked, chunk extensions and no data", "Transfer-Encoding: chunked", drip("1;"+strings.Repeat("a", 200), 1, 20*time.Millisecond)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, store, addr := pacedEnv(t, lim, bodyTimeout)
			done := make(chan struct{})
			var code int
			var took time.Duration
			go func() {
				defer close(done)
				code, took = exchange(t, addr, signedHead(body, tt.framing), tt.send)
			}()
			// While it stalls, a delivery still gets the one place in flight.
			time.Sleep(bodyTimeout / 3)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, signedRequest(strings.Replace(completed, "job_1", "job_beside", 1), testNow, testSecret))
			if w.Code != http.StatusNoContent {
				t.Errorf("a delivery beside the stalled body: %d, want 204 (a body arriving holds no place)", w.Code)
			}
			<-done
			t.Logf("%d after %v", code, took.Round(time.Millisecond))
			if code != http.StatusRequestTimeout {
				t.Errorf("status %d, want 408", code)
			}
			if took < bodyTimeout || took > bodyTimeout+time.Second {
				t.Errorf("answered after %v, want soon after the %v body timeout (the read timeout is %v)", took, bodyTimeout, lim.ReadTimeout)
			}
			if n := h.InFlight() + h.Receiving(); n != 0 {
				t.Errorf("requests still counted: %d", n)
			}
			rows, err := store.List(context.Background(), inbox.Filter{})
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != 1 || rows[0].ID != "job_beside" {
				t.Errorf("rows = %v, want only job_beside: nothing of a stalled body", rows)
			}
		})
	}
}

// TestSlowBodyKeepingPace sends a body that takes longer than the body
// timeout but keeps above MinBodyRate: it is read whole and stored.
func TestSlowBodyKeepingPace(t *testing.T) {
	t.Parallel()
	const bodyTimeout = 200 * time.Millisecond
	lim := DefaultLimits()
	_, store, addr := pacedEnv(t, lim, bodyTimeout)
	body := padded("job_paced", 256<<10)
	// 16 KiB every 50 ms: 320 KiB/s, five times MinBodyRate, about 0.8 s.
	code, took := exchange(t, addr, signedHead(body, "Content-Length: "+strconv.Itoa(len(body))), drip(body, 16<<10, 50*time.Millisecond))
	t.Logf("%d KiB at 320 KiB/s: %d after %v", len(body)>>10, code, took.Round(time.Millisecond))
	if code != http.StatusNoContent || took < 2*bodyTimeout {
		t.Fatalf("status %d after %v, want 204 after more than the %v body timeout", code, took, bodyTimeout)
	}
	if ev, err := store.Get(context.Background(), "job_paced"); err != nil || string(ev.Body) != body {
		t.Errorf("stored %d bytes, %v; want the whole body", len(ev.Body), err)
	}
}

// TestBodyPaceWithinReadTimeout checks that a body keeping pace is still
// given up at the read timeout, counted from the request's first byte (as
// net/http counts it), not from when the handler began: the pace extends
// the body's deadline, never the request's.
func TestBodyPaceWithinReadTimeout(t *testing.T) {
	// Not parallel: the answer must come within half a second of the read
	// timeout.
	lim := DefaultLimits()
	lim.ReadHeaderTimeout, lim.ReadTimeout, lim.WriteTimeout = time.Second, time.Second, 2*time.Second
	_, store, addr := pacedEnv(t, lim, 400*time.Millisecond)
	body := padded("job_long", 1<<20)
	head := signedHead(body, "Content-Length: "+strconv.Itoa(len(body)))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	first := time.Now()
	// The headers in two parts, half a second apart, then the body at
	// 320 KiB/s: it would take over 3 s.
	io.WriteString(c, head[:20])
	time.Sleep(500 * time.Millisecond)
	io.WriteString(c, head[20:])
	go drip(body, 16<<10, 50*time.Millisecond)(c)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	took := time.Since(first)
	code := 0
	if err == nil {
		code = resp.StatusCode
	}
	t.Logf("answer %d after %v from the first byte", code, took.Round(time.Millisecond))
	if code != http.StatusBadRequest || took < lim.ReadTimeout-50*time.Millisecond || took > lim.ReadTimeout+500*time.Millisecond {
		t.Errorf("status %d after %v from the first byte, want 400 at the %v read timeout", code, took, lim.ReadTimeout)
	}
	if _, err := store.Get(context.Background(), "job_long"); err == nil {
		t.Error("a body cut at the read timeout was stored")
	}
}

// TestReadBodyOneBuffer reads small bodies of declared length, as nearly
// every delivery is: each is read into one buffer of its length (and the
// byte that sees its end), not grown into two or three, and the budget
// holds just that.
func TestReadBodyOneBuffer(t *testing.T) {
	// Not parallel: AllocsPerRun counts the allocations of every test running.
	for _, n := range []int{0, 1, firstRead, 1024, wholeBody - 1} {
		body := strings.Repeat("x", n)
		src := strings.NewReader(body)
		r := httptest.NewRequest(http.MethodPost, "/webhooks/sume", nil)
		r.Body, r.ContentLength = io.NopCloser(src), int64(n)
		budget := NewBudget(DefaultBodyMemory)
		w := httptest.NewRecorder()
		var got []byte
		allocs := testing.AllocsPerRun(50, func() {
			src.Reset(body)
			held := reservation{budget: budget}
			b, err := readBody(w, r, 4<<20, 0, &held)
			if err != nil {
				t.Fatal(err)
			}
			if used := budget.Used(); used != int64(cap(b)) {
				t.Fatalf("budget holds %d, want the buffer's %d", used, cap(b))
			}
			got = b
			held.release()
		})
		if string(got) != body || cap(got) != n+1 {
			t.Errorf("%d bytes: read %d into a buffer of %d, want them in one of %d", n, len(got), cap(got), n+1)
		}
		if allocs > 1 {
			t.Errorf("%d bytes: %.0f allocations, want 1", n, allocs)
		}
	}
}
