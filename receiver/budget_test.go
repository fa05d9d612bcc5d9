package receiver

import (
	"bufio"
	"context"
	"errors"
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
)

// budgetEnv serves a real handler under budget through Serve, on a free
// port, until the test ends. Bodies may take 5 s.
func budgetEnv(t *testing.T, budget *Budget, store Store) (*Handler, string) {
	t.Helper()
	if store == nil {
		store = sqlitetest.MustOpen(t, sqlite.Options{})
	}
	h, err := NewHandler(store, Config{
		Keys:        keys(testSecret),
		Scheme:      scheme.Sume{Tolerance: 5 * time.Minute},
		Rules:       inbox.Rules{Events: []string{"job.completed"}, MaxBody: 2 << 20},
		HardCap:     4 << 20,
		Budget:      budget,
		BodyTimeout: 5 * time.Second,
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
	go func() {
		done <- Serve(ctx, DefaultLimits(), zerolog.Nop(), Endpoint{Name: "webhooks", Listener: ln, Handler: h})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return h, ln.Addr().String()
}

// partial is a request whose body is sent in parts.
type partial struct {
	c  net.Conn
	br *bufio.Reader
}

// open dials addr and sends head and the first part of the body.
func open(t *testing.T, addr, head, first string) *partial {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, head+first); err != nil {
		t.Fatal(err)
	}
	return &partial{c: c, br: bufio.NewReader(c)}
}

// answer sends rest (in the background: the answer may come first) and
// returns the response, read within 10 s.
func (p *partial) answer(t *testing.T, rest string) *http.Response {
	t.Helper()
	go io.WriteString(p.c, rest)
	p.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(p.br, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	resp.Body.Close()
	return resp
}

// waitUsed waits until cond holds of the budget's use, up to 5 s.
func waitUsed(t *testing.T, b *Budget, what string, cond func(int64) bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond(b.Used()) {
		if time.Now().After(deadline) {
			t.Fatalf("budget: %s; used %d", what, b.Used())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestBodyMemoryBound checks that slow bodies declaring megabytes hold
// what they sent, not what they declared; then fills the part of an 8 MiB
// budget large bodies may take with one 4 MiB body held half-way, and
// checks: a declared body that does not fit is answered 503 with
// Retry-After at once, before it is read; a chunked one that outgrows what
// is left is answered 503 as soon as it does; small deliveries still get
// 204 beside them; and the held body, once whole, is stored and gives its
// bytes back.
func TestBodyMemoryBound(t *testing.T) {
	// Not parallel: it holds tens of MiB, and its 503 must come within a
	// second.
	budget := NewBudget(8 << 20) // large bodies: up to 6 MiB together
	h, addr := budgetEnv(t, budget, nil)

	// Slow bodies that declare megabytes hold their first buffer only.
	const slow = 20
	for i := range slow {
		body := padded(fmt.Sprintf("job_slow_%d", i), 3<<20)
		open(t, addr, signedHead(body, "Content-Length: "+strconv.Itoa(len(body))), body[:10])
	}
	waitUsed(t, budget, "the slow bodies are in", func(n int64) bool { return n >= slow*firstRead })
	time.Sleep(100 * time.Millisecond)
	if got := budget.Used(); got > slow*firstRead {
		t.Errorf("%d slow bodies of 3 MiB declared hold %d bytes, want at most %d", slow, got, slow*firstRead)
	}

	big := padded("job_big", 4<<20-200)
	held := open(t, addr, signedHead(big, "Content-Length: "+strconv.Itoa(len(big))), big[:3<<20])
	waitUsed(t, budget, "the held body's 3 MiB arrived", func(n int64) bool { return n >= 3<<20 })
	t.Logf("one 4 MiB body, 3 MiB in: budget used %d KiB of %d KiB", budget.Used()>>10, budget.Size()>>10)

	other := padded("job_other", 4<<20-200)
	start := time.Now()
	resp := open(t, addr, signedHead(other, "Content-Length: "+strconv.Itoa(len(other))), "").answer(t, "")
	if took := time.Since(start); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || took > time.Second {
		t.Errorf("a second 4 MiB body, declared, none of it sent: %d (Retry-After %q) after %v; want 503 with Retry-After at once",
			resp.StatusCode, resp.Header.Get("Retry-After"), took)
	}
	if !resp.Close {
		t.Error("the 503 keeps the connection open: the unread body would follow")
	}

	// Chunked: no length to check up front, so it is refused once it
	// outgrows what is left (about 2 MiB), its rest unread.
	var chunks strings.Builder
	for range 64 {
		fmt.Fprintf(&chunks, "%x\r\n%s\r\n", 64<<10, strings.Repeat(" ", 64<<10))
	}
	chunked := open(t, addr, signedHead(other, "Transfer-Encoding: chunked"), chunks.String())
	if resp := chunked.answer(t, "0\r\n\r\n"); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("4 MiB chunked beside the held body: %d, want 503 with Retry-After", resp.StatusCode)
	}

	for i := range 20 {
		body := strings.Replace(completed, "job_1", fmt.Sprintf("job_small_%d", i), 1)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, signedRequest(body, testNow, testSecret))
		if w.Code != http.StatusNoContent {
			t.Fatalf("a small delivery beside the large bodies: %d, want 204", w.Code)
		}
	}

	if resp := held.answer(t, big[3<<20:]); resp.StatusCode != http.StatusNoContent {
		t.Errorf("the held body, once whole: %d, want 204", resp.StatusCode)
	}
	if used := budget.Used(); used > slow*firstRead {
		t.Errorf("budget used %d with only the slow bodies left, want at most %d", used, slow*firstRead)
	}
}

// TestBodyMemoryGivenBack sends bodies that end every way a request can
// (stored, parked, refused by signature, too large declared or chunked,
// cut off by the client, the store down) and checks each gives its bytes
// back to the budget once answered.
func TestBodyMemoryGivenBack(t *testing.T) {
	t.Parallel()
	budget := NewBudget(DefaultBodyMemory)
	_, addr := budgetEnv(t, budget, nil)
	big := padded("job_parked", 3<<20)
	for _, tt := range []struct {
		name, head, body string
		closeEarly       bool
	}{
		{"stored", signedHead(completed, "Content-Length: "+strconv.Itoa(len(completed))), completed, false},
		{"parked too_large", signedHead(big, "Content-Length: "+strconv.Itoa(len(big))), big, false},
		{"forged", signedHead(big, "Content-Length: "+strconv.Itoa(len(big))), strings.Replace(big, "x", "y", 1), false},
		{"declared above the cap", signedHead(big, "Content-Length: "+strconv.Itoa(5<<20)), "", false},
		{"chunked past the cap", signedHead(big, "Transfer-Encoding: chunked"), strings.Repeat(fmt.Sprintf("%x\r\n%s\r\n", 1<<20, strings.Repeat("x", 1<<20)), 5), false},
		{"cut off by the client", signedHead(big, "Content-Length: "+strconv.Itoa(len(big))), big[:2<<20], true},
	} {
		p := open(t, addr, tt.head, "")
		if tt.closeEarly {
			io.WriteString(p.c, tt.body)
			waitUsed(t, budget, tt.name+": the body is arriving", func(n int64) bool { return n >= 2<<20 })
			p.c.Close()
		} else {
			resp := p.answer(t, tt.body)
			t.Logf("%s: %d", tt.name, resp.StatusCode)
		}
		waitUsed(t, budget, tt.name+": all given back", func(n int64) bool { return n == 0 })
	}

	down := NewBudget(DefaultBodyMemory)
	h, _ := budgetEnv(t, down, failingStore{err: errors.New("disk I/O error")})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, signedRequest(completed, testNow, testSecret))
	if w.Code != http.StatusServiceUnavailable || down.Used() != 0 {
		t.Errorf("store down: %d, budget used %d after; want 503 and 0", w.Code, down.Used())
	}
}

// TestBodyMemorySharedAcrossSources checks that handlers given one budget
// draw on it together: what one source's body holds, another's cannot.
func TestBodyMemorySharedAcrossSources(t *testing.T) {
	t.Parallel()
	budget := NewBudget(8 << 20)
	_, a := budgetEnv(t, budget, nil)
	_, b := budgetEnv(t, budget, nil)
	big := padded("job_a", 4<<20-200)
	open(t, a, signedHead(big, "Content-Length: "+strconv.Itoa(len(big))), big[:3<<20])
	waitUsed(t, budget, "source a's body arrived", func(n int64) bool { return n >= 3<<20 })
	other := padded("job_b", 4<<20-200)
	if resp := open(t, b, signedHead(other, "Content-Length: "+strconv.Itoa(len(other))), "").answer(t, ""); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("source b's 4 MiB body while source a's holds the budget: %d, want 503", resp.StatusCode)
	}
}

// TestNewHandlerRefusesSmallBudget: a budget under twice the hard cap
// could never take a body of the hard cap beside others.
func TestNewHandlerRefusesSmallBudget(t *testing.T) {
	t.Parallel()
	store := sqlitetest.MustOpen(t, sqlite.Options{})
	for _, tt := range []struct {
		budget int64
		ok     bool
	}{{0, false}, {4 << 20, false}, {8<<20 - 1, false}, {8 << 20, true}} {
		_, err := NewHandler(store, Config{Keys: keys(testSecret), Scheme: scheme.Sume{Tolerance: time.Minute}, HardCap: 4 << 20, Budget: NewBudget(tt.budget)}, zerolog.Nop())
		if (err == nil) != tt.ok {
			t.Errorf("budget %d for a hard cap of 4 MiB: error %v, want ok %v", tt.budget, err, tt.ok)
		}
	}
}

// TestBudgetKeepsRoomForSmallBodies grows large bodies until the budget
// refuses them, and checks they stopped at three quarters of it while
// small bodies still get the rest.
func TestBudgetKeepsRoomForSmallBodies(t *testing.T) {
	t.Parallel()
	budget := NewBudget(8 << 20)
	var large []*reservation
	for {
		r := &reservation{budget: budget}
		buf, err := r.grow(nil, firstRead)
		for err == nil && cap(buf) < 1<<20 {
			buf, err = r.grow(buf, 2*cap(buf))
		}
		if err != nil {
			r.release() // as its 503 does
			break
		}
		large = append(large, r)
	}
	full := budget.Used()
	t.Logf("large bodies hold %d KiB of %d KiB when refused", full>>10, budget.Size()>>10)
	if full > budget.Size()*3/4 || full < budget.Size()*3/4-(2<<20) {
		t.Errorf("large bodies were refused at %d bytes, want within 2 MiB under three quarters of %d", full, budget.Size())
	}
	var small int
	for {
		r := &reservation{budget: budget}
		if _, err := r.grow(nil, smallBody); err != nil {
			break
		}
		small++
	}
	if want := int((budget.Size() - full) / smallBody); small != want {
		t.Errorf("%d small bodies fitted beside the large ones, want %d", small, want)
	}
	if budget.Used() > budget.Size() {
		t.Errorf("used %d of %d", budget.Used(), budget.Size())
	}
	for _, r := range large {
		r.release()
	}
	if got := budget.Used(); got != int64(small)*smallBody {
		t.Errorf("after the large bodies are given back: used %d, want the small ones' %d", got, int64(small)*smallBody)
	}
}
