package dispatch_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"inbox/dispatch"
	"inbox/inbox"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

// hangingRows and goodRows are the case: 6 rows the destination
// accepts and never answers, queued before 100 it takes at once, with 4
// workers and the default timeout.
const (
	hangingRows = 6
	goodRows    = 100
)

// queue stores hanging rows hang_0 ... first, then good rows good_000 ...,
// each a millisecond after the one before, so they are claimed in that
// order.
func queue(t *testing.T, hanging, good int) *sqlite.Store {
	t.Helper()
	c := newClock()
	s := sqlitetest.MustOpen(t, sqlite.Options{Now: c.Now})
	put := func(id string) {
		if _, err := s.Put(context.Background(), inbox.Classify("", inbox.Named{}, []byte(body(id)), 1_800_000_000, rules)); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Millisecond)
	}
	for i := range hanging {
		put(fmt.Sprintf("hang_%d", i))
	}
	for i := range good {
		put(fmt.Sprintf("good_%03d", i))
	}
	return s
}

// destination is a destination that hangs on the rows named hang_*, until
// release is closed, and takes the others at once, counting them.
type destination struct {
	name string
	// make returns the destination, a channel that closes once good rows
	// were taken, and a func that releases the hanging ones.
	make func(t *testing.T, good int) (dispatch.Destination, <-chan struct{}, func())
}

// counter closes done once it has counted n.
type counter struct {
	n    atomic.Int64
	want int64
	done chan struct{}
}

func (c *counter) add() {
	if c.n.Add(1) == c.want {
		close(c.done)
	}
}

var destinations = []destination{
	{"http", func(t *testing.T, good int) (dispatch.Destination, <-chan struct{}, func()) {
		release := make(chan struct{})
		cnt := &counter{want: int64(good), done: make(chan struct{})}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.Header.Get(dispatch.HeaderKey), "hang_") {
				select { // accepted, never answered
				case <-release:
				case <-r.Context().Done():
				}
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			cnt.add()
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(srv.Close)
		f, err := dispatch.NewForward(srv.URL, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		var once sync.Once
		return f, cnt.done, func() { once.Do(func() { close(release) }) }
	}},
	{"exec", func(t *testing.T, good int) (dispatch.Destination, <-chan struct{}, func()) {
		dir := t.TempDir()
		released := filepath.Join(dir, "released")
		e, err := dispatch.NewExec(script(t, `
case "$INBOX_KEY" in
hang_*) while [ ! -e "`+released+`" ]; do sleep 0.05; done; exit 1 ;;
esac
: > "`+dir+`/$INBOX_KEY.done"
`), dispatch.Withheld{})
		if err != nil {
			t.Fatal(err)
		}
		cnt := &counter{want: int64(good), done: make(chan struct{})}
		// The command's own record, counted as it lands.
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			seen := map[string]bool{}
			for {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
				files, _ := filepath.Glob(filepath.Join(dir, "good_*.done"))
				for _, f := range files {
					if !seen[f] {
						seen[f] = true
						cnt.add()
					}
				}
			}
		})
		var once sync.Once
		return e, cnt.done, func() {
			once.Do(func() {
				close(stop)
				wg.Wait()
				os.WriteFile(released, nil, 0o600)
			})
		}
	}},
}

// drainTime runs a dispatcher with the default timeout over hanging rows
// that hang and good rows, and returns how long the good ones took to be
// taken.
func drainTime(t *testing.T, dest destination, hanging, good int) time.Duration {
	t.Helper()
	s := queue(t, hanging, good)
	d, done, release := dest.make(t, good)
	began := time.Now()
	start(t, s, dispatch.Config{Destination: d, Workers: 4})
	t.Cleanup(release) // before the dispatcher stops: it waits for its attempts
	select {
	case <-done:
	case <-time.After(dispatch.DefaultTimeout):
		t.Fatalf("%d good rows not taken within the timeout", good)
	}
	took := time.Since(began)
	for i := range hanging {
		id := fmt.Sprintf("hang_%d", i)
		if e := row(t, s, id); e.Status != inbox.StatusNew || e.Attempts != 1 || e.LastError != "" || e.LeaseOwner == "" {
			t.Errorf("%s = %+v, want its first attempt still under way", id, e)
		}
	}
	return took
}

// TestHangingRowsHoldNoWorker queues 6 rows the destination never answers
// before 100 it takes, with 4 workers: the hanging attempts go on beside
// the workers, so the good rows are delayed by a small part of the
// timeout (the issue saw a whole one), for an HTTP endpoint and a command.
// The hanging attempts are not cut short: they still run when the good
// rows are done.
func TestHangingRowsHoldNoWorker(t *testing.T) {
	t.Parallel()
	for _, dest := range destinations {
		t.Run(dest.name, func(t *testing.T) {
			alone := drainTime(t, dest, 0, goodRows)
			behind := drainTime(t, dest, hangingRows, goodRows)
			delay := behind - alone
			t.Logf("%s: %d good rows took %v alone, %v behind %d hanging ones: delayed %v, %.1f%% of the %v timeout",
				dest.name, goodRows, alone.Round(time.Millisecond), behind.Round(time.Millisecond), hangingRows,
				delay.Round(time.Millisecond), 100*delay.Seconds()/dispatch.DefaultTimeout.Seconds(), dispatch.DefaultTimeout)
			if bound := dispatch.DefaultTimeout / 10; delay > bound {
				t.Errorf("the hanging rows delayed the good ones by %v, want at most %v (a tenth of the timeout)", delay, bound)
			}
		})
	}
}
