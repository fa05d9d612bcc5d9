package health_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"inbox/health"
	"inbox/inbox"
)

// disk is a store whose commits fail above room bytes: it forces a probe
// to fail as a full disk fails it, and records what each probe wrote.
type disk struct {
	room   int
	sizes  []int
	during func() // run inside the probe, as a commit landing meanwhile
}

func (d *disk) Probe(ctx context.Context, size int) error {
	d.sizes = append(d.sizes, size)
	if d.during != nil {
		d.during()
	}
	if size > d.room {
		return errors.New("disk full")
	}
	return nil
}

// TestReadyFollowsCommits checks the rule readiness applies to the store's
// commits: after a failed commit the probe writes a margin over its largest
// delivery (bounded), so a disk with room for the probe's row alone, or
// for the delivery's bytes alone, fails it;
// it passes again, with no delivery, once that much fits; a commit that
// succeeds ends the doubt; the dispatcher's writes count, its shutdown
// does not; and a commit that fails while the probe runs stands.
func TestReadyFollowsCommits(t *testing.T) {
	full := errors.New("commit: disk full")
	d := &disk{room: 1000}
	var commits health.Commits
	ready := health.Ready(d, &commits, time.Second, zerolog.Nop())
	step := func(name string, want, wantSize int) {
		t.Helper()
		code, _, _ := probe(t, ready)
		if got := d.sizes[len(d.sizes)-1]; code != want || got != wantSize {
			t.Errorf("%s: %d, probe wrote %d bytes; want %d, %d bytes", name, code, got, want, wantSize)
		}
	}
	step("no commit yet", http.StatusOK, 0)
	commits.Committed(inbox.Commit{N: 3, Largest: 60 << 10, Err: full})
	step("a commit of 60 KiB deliveries failed", http.StatusServiceUnavailable, inbox.ProbeSize(60<<10))
	commits.Committed(inbox.Commit{N: 1, Largest: 10, Err: full})
	step("a smaller one failed too", http.StatusServiceUnavailable, inbox.ProbeSize(60<<10))
	d.room = 60<<10 + 4096
	step("room for the delivery's bytes but not its pages", http.StatusServiceUnavailable, inbox.ProbeSize(60<<10))
	d.room = 1 << 20
	step("the disk has room again", http.StatusOK, inbox.ProbeSize(60<<10))
	step("after the probe's commit, no delivery since", http.StatusOK, inbox.ProbeSize(60<<10))
	d.room = 1000
	step("the disk filled again with no delivery", http.StatusServiceUnavailable, inbox.ProbeSize(60<<10))
	commits.Committed(inbox.Commit{N: 1, Largest: 10})
	step("after a delivery's commit", http.StatusOK, 0)

	d.room = 0
	commits.Committed(inbox.Commit{N: 1, Largest: 5000, Err: full})
	commits.Committed(inbox.Commit{N: 2, Largest: 5000})
	step("a commit succeeded after the failed one", http.StatusOK, 0)

	commits.Committed(inbox.Commit{N: 1, Largest: 100 << 20, Err: full})
	step("a failed commit larger than the bound", http.StatusServiceUnavailable, inbox.ProbeSize(inbox.MaxProbeSize))
	commits.Committed(inbox.Commit{N: 1})

	// The dispatcher's writes, observed while a probe runs: its stopping
	// is not the store's outcome, a failed settlement is.
	d.during = func() { commits.Observe(context.Canceled); commits.Observe(inbox.ErrClosed) }
	step("the dispatcher stopping", http.StatusOK, 0)
	d.during = func() { commits.Observe(full) }
	step("a settlement failed", http.StatusServiceUnavailable, 0)
	d.during = nil
	step("the probe after it", http.StatusOK, 0)

	d.during = func() { commits.Committed(inbox.Commit{N: 1, Largest: 10, Err: full}) }
	step("a commit failed while the probe ran", http.StatusServiceUnavailable, 0)
	d.during = nil
	d.room = inbox.ProbeSize(10)
	step("the next probe", http.StatusOK, inbox.ProbeSize(10))
}

// TestReadyFollowsSettle: a failed Settle of settlements (Settled) keeps
// readiness failing though the probe commits, a Start or a delivery that
// commits meanwhile included, until a Settle succeeds; the caller's own
// context ending is no failure.
func TestReadyFollowsSettle(t *testing.T) {
	held := errors.New("settle: 1 of the settlements not recorded: the row is held")
	d := &disk{room: 1000}
	var commits health.Commits
	ready := health.Ready(d, &commits, time.Second, zerolog.Nop())
	code := func() int { c, _, _ := probe(t, ready); return c }
	commits.Settled(context.Canceled)
	if got := code(); got != http.StatusOK {
		t.Fatalf("after a Settle cut short by its caller: %d, want 200", got)
	}
	commits.Settled(held)
	for _, name := range []string{"a Settle failed", "the probe after it"} {
		if got := code(); got != http.StatusServiceUnavailable {
			t.Errorf("%s: %d, want 503", name, got)
		}
	}
	commits.Observe(nil)
	commits.Committed(inbox.Commit{N: 1})
	if got := code(); got != http.StatusServiceUnavailable {
		t.Errorf("a Start and a delivery committed, the Settle still failing: %d, want 503", got)
	}
	commits.Settled(nil)
	if got := code(); got != http.StatusOK {
		t.Errorf("a Settle succeeded: %d, want 200", got)
	}
}

// TestReadyKeepsTheRefusedSize: once a probe of the refused delivery's
// margin has committed, and before any delivery has, a write that fails
// then (a small delivery's, or the dispatcher's, which carry no body)
// leaves the probe that margin: a probe of its small row alone would pass
// on a disk the refused delivery still does not fit.
func TestReadyKeepsTheRefusedSize(t *testing.T) {
	full := errors.New("commit: disk full")
	for _, fail := range []struct {
		name string
		fail func(*health.Commits)
	}{
		{"a dispatcher's write", func(c *health.Commits) { c.Observe(full) }},
		{"a small delivery", func(c *health.Commits) { c.Committed(inbox.Commit{N: 1, Largest: 10, Err: full}) }},
	} {
		t.Run(fail.name, func(t *testing.T) {
			d := &disk{room: 1000}
			var commits health.Commits
			ready := health.Ready(d, &commits, time.Second, zerolog.Nop())
			commits.Committed(inbox.Commit{N: 1, Largest: 60 << 10, Err: full})
			d.room = 1 << 20
			if code, _, _ := probe(t, ready); code != http.StatusOK {
				t.Fatalf("the disk has room again: %d", code)
			}
			d.room = 1000
			fail.fail(&commits)
			code, _, _ := probe(t, ready)
			if got, want := d.sizes[len(d.sizes)-1], inbox.ProbeSize(60<<10); code != http.StatusServiceUnavailable || got != want {
				t.Errorf("after %s failed: %d, probe wrote %d bytes; want 503, %d bytes", fail.name, code, got, want)
			}
		})
	}
}
