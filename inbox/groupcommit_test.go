package inbox_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"inbox/inbox"
)

// TestGroupCommitAgain sends a write its store's first commit leaves out
// (its row held): it leads the next batch and reaches its caller from
// there, and the commit that left it out does not count it.
func TestGroupCommitAgain(t *testing.T) {
	stop := make(chan struct{})
	var commits []inbox.Commit
	tries := 0
	g := inbox.NewGroupCommit(inbox.GroupCommit[int]{
		MaxBatch: 8, Retry: time.Millisecond, Stop: stop,
		Commit: func(batch []*inbox.Write[int]) ([]inbox.Written, error) {
			tries++
			out := make([]inbox.Written, len(batch))
			for i, w := range batch {
				out[i] = inbox.Written{Result: inbox.Result{ID: w.Delivery.Key}, Again: tries == 1}
			}
			return out, nil
		},
		OnCommit: func(c inbox.Commit) { commits = append(commits, c) },
	})
	done := make(chan struct{})
	go func() { defer close(done); g.Run() }()
	w := g.Send(context.Background(), context.Background(), &inbox.Write[int]{Delivery: inbox.Delivery{Key: "k", Body: []byte("abc")}})
	close(stop)
	<-done
	if w.Err != nil || w.Result.ID != "k" {
		t.Fatalf("got %+v, want the second commit's result for k", w)
	}
	if tries != 2 || len(commits) != 1 || commits[0].N != 1 || commits[0].Largest != 3 {
		t.Fatalf("got %d commits reported as %+v, want 2 tried and 1 reported carrying the write", tries, commits)
	}
}

// TestGroupCommitStopFailsWaiting stops the loop while a write waits for a
// later batch: its caller gets ErrClosed, and so does a later Send.
func TestGroupCommitStopFailsWaiting(t *testing.T) {
	stop := make(chan struct{})
	g := inbox.NewGroupCommit(inbox.GroupCommit[int]{
		MaxBatch: 8, Retry: time.Hour, Stop: stop,
		Commit: func(batch []*inbox.Write[int]) ([]inbox.Written, error) {
			return make([]inbox.Written, len(batch)), errors.New("locked")
		},
	})
	committed := make(chan struct{}, 1)
	g2 := inbox.NewGroupCommit(inbox.GroupCommit[int]{
		MaxBatch: 8, Retry: time.Hour, Stop: stop,
		Commit: func(batch []*inbox.Write[int]) ([]inbox.Written, error) {
			committed <- struct{}{}
			out := make([]inbox.Written, len(batch))
			for i := range out {
				out[i].Again = true
			}
			return out, nil
		},
	})
	done := make(chan struct{}, 2)
	go func() { g.Run(); done <- struct{}{} }()
	go func() { g2.Run(); done <- struct{}{} }()
	if w := g.Send(context.Background(), context.Background(), &inbox.Write[int]{}); w.Err == nil || w.Err.Error() != "locked" {
		t.Fatalf("got %v, want the commit's error", w.Err)
	}
	got := make(chan inbox.Written)
	go func() { got <- g2.Send(context.Background(), context.Background(), &inbox.Write[int]{}) }()
	<-committed // the write taken, and waiting an hour to be tried again
	close(stop)
	if w := <-got; !errors.Is(w.Err, inbox.ErrClosed) {
		t.Fatalf("got %v, want ErrClosed for the waiting write", w.Err)
	}
	<-done
	<-done
	if w := g.Send(context.Background(), context.Background(), &inbox.Write[int]{}); !errors.Is(w.Err, inbox.ErrClosed) {
		t.Fatalf("got %v after Stop, want ErrClosed", w.Err)
	}
}

// TestGroupCommitFill runs two loops: while one commit is under way, the
// other loop's batch waits for MinFill writes rather than committing the
// first alone; and, short of MinFill, it waits no longer than FillWait,
// so a slow commit holds up no other batch.
func TestGroupCommitFill(t *testing.T) {
	stop := make(chan struct{})
	release := make(chan struct{})
	sizes := make(chan int, 16)
	g := inbox.NewGroupCommit(inbox.GroupCommit[int]{
		MaxBatch: 8, MinFill: 3, FillWait: 300 * time.Millisecond, Stop: stop,
		Commit: func(batch []*inbox.Write[int]) ([]inbox.Written, error) {
			if batch[0].Delivery.Key == "slow" {
				<-release
			}
			sizes <- len(batch)
			return make([]inbox.Written, len(batch)), nil
		},
	})
	send := runLoops(t, g, 2, stop)
	slow := send("slow")
	time.Sleep(50 * time.Millisecond) // under way, and held
	start := time.Now()
	var quick []chan inbox.Written
	for _, k := range []string{"a", "b", "c"} {
		quick = append(quick, send(k))
		time.Sleep(20 * time.Millisecond)
	}
	for _, c := range quick {
		<-c
	}
	if took, n := time.Since(start), <-sizes; n != 3 || took > 250*time.Millisecond {
		t.Errorf("beside a commit under way: a batch of %d after %v, want the 3 writes together, before FillWait", n, took)
	}
	start = time.Now()
	<-send("d")
	if took, n := time.Since(start), <-sizes; n != 1 || took < 250*time.Millisecond || took > time.Second {
		t.Errorf("one write beside a held commit: a batch of %d after %v, want it alone after FillWait (300ms)", n, took)
	}
	close(release)
	if w := <-slow; w.Err != nil {
		t.Fatal(w.Err)
	}
}

// TestGroupCommitTurns runs two loops that take their batches in turn
// (CommitTurn): while the first batch holds the turn, no other batch
// begins; once it passes the turn, the next batch begins while the first
// commit is still under way, and holds the writes that waited meanwhile.
func TestGroupCommitTurns(t *testing.T) {
	stop := make(chan struct{})
	firstIn, gate, secondIn := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var batches [][]string
	g := inbox.NewGroupCommit(inbox.GroupCommit[int]{
		MaxBatch: 8, MinFill: 3, FillWait: time.Minute, Stop: stop,
		CommitTurn: func(batch []*inbox.Write[int], pass func()) ([]inbox.Written, error) {
			var keys []string
			for _, w := range batch {
				keys = append(keys, w.Delivery.Key)
			}
			mu.Lock()
			batches = append(batches, keys)
			n := len(batches)
			mu.Unlock()
			switch n {
			case 1:
				close(firstIn)
				<-gate
				pass()
				pass() // again: nothing
				select {
				case <-secondIn:
				case <-time.After(10 * time.Second):
					t.Error("the next batch did not begin while the first commit was under way")
				}
			case 2:
				close(secondIn)
			}
			return make([]inbox.Written, len(batch)), nil
		},
	})
	send := runLoops(t, g, 2, stop)
	first := send("first")
	<-firstIn
	var rest []chan inbox.Written
	for _, k := range []string{"a", "b", "c"} {
		rest = append(rest, send(k))
	}
	for range 1000 { // time for a loop that does not wait its turn to take them
		runtime.Gosched()
	}
	mu.Lock()
	if len(batches) != 1 {
		t.Errorf("batches %v before the first passed the turn, want only the first", batches)
	}
	mu.Unlock()
	close(gate)
	for _, c := range append(rest, first) {
		if w := <-c; w.Err != nil {
			t.Fatal(w.Err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(batches) != 2 || len(batches[1]) != 3 {
		t.Errorf("batches %v, want the first alone and then a, b and c together", batches)
	}
}

// runLoops runs n loops of g until the test ends (closing stop then), and
// returns a send that hands g a write of key from a goroutine of its own
// and gives its answer on the channel it returns.
func runLoops(t *testing.T, g *inbox.GroupCommit[int], n int, stop chan struct{}) func(key string) chan inbox.Written {
	var loops sync.WaitGroup
	for range n {
		loops.Go(g.Run)
	}
	t.Cleanup(func() { close(stop); loops.Wait() })
	return func(key string) chan inbox.Written {
		c := make(chan inbox.Written, 1)
		go func() {
			c <- g.Send(context.Background(), context.Background(), &inbox.Write[int]{Delivery: inbox.Delivery{Key: key}})
		}()
		return c
	}
}

// TestGroupCommitOneP runs the loop and 32 senders on one P: the senders
// the loop's answers woke get their turn before the next batch is taken,
// so batches carry many writes rather than one each.
func TestGroupCommitOneP(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	stop := make(chan struct{})
	var commits, writes int
	g := inbox.NewGroupCommit(inbox.GroupCommit[int]{
		MaxBatch: 64, Stop: stop,
		Commit: func(batch []*inbox.Write[int]) ([]inbox.Written, error) {
			commits++
			writes += len(batch)
			return make([]inbox.Written, len(batch)), nil
		},
	})
	done := make(chan struct{})
	go func() { defer close(done); g.Run() }()
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for range 10 {
				g.Send(context.Background(), context.Background(), &inbox.Write[int]{})
			}
		})
	}
	wg.Wait()
	close(stop)
	<-done
	if per := float64(writes) / float64(commits); per < 8 {
		t.Errorf("%d writes in %d commits, %.1f a commit: want batches of 8 or more", writes, commits, per)
	}
}
