package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"inbox/inbox"
)

// alertMemory is what inbox alert keeps of its findings in a store.
type alertMemory interface {
	Alerts(ctx context.Context, scope string) ([]inbox.Alert, error)
	SwapAlerts(ctx context.Context, swaps []inbox.AlertSwap) ([]bool, error)
}

func runAlerts(t *testing.T, o opener) {
	memory := func(t *testing.T) alertMemory {
		t.Helper()
		m, ok := o.fresh(t).s.(alertMemory)
		if !ok {
			t.Fatal("the store keeps no alerts: it has no Alerts and SwapAlerts")
		}
		return m
	}
	ctx := context.Background()
	alert := func(scope, finding string, count, rev int64, at time.Time) *inbox.Alert {
		return &inbox.Alert{Scope: scope, Finding: finding, OpenedAt: t0, Count: count, ReportedAt: at, Rev: rev}
	}
	swap := func(t *testing.T, m alertMemory, swaps ...inbox.AlertSwap) []bool {
		t.Helper()
		held, err := m.SwapAlerts(ctx, swaps)
		if err != nil {
			t.Fatal(err)
		}
		if len(held) != len(swaps) {
			t.Fatalf("SwapAlerts said %d of %d swaps", len(held), len(swaps))
		}
		return held
	}
	read := func(t *testing.T, m alertMemory, scope string) []inbox.Alert {
		t.Helper()
		got, err := m.Alerts(ctx, scope)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	t.Run("a swap holds only on the row as read", func(t *testing.T) {
		t.Parallel()
		m := memory(t)
		if got := read(t, m, "parked"); len(got) != 0 {
			t.Fatalf("a new store has alerts: %+v", got)
		}
		a := alert("parked", "unknown_event", 2, 1, t0)
		b := alert("parked", "missed job_1", 1, 1, t0)
		other := alert("quiet", "unknown_event", 7, 1, t0)
		if held := swap(t, m, inbox.AlertSwap{New: a}, inbox.AlertSwap{New: b}, inbox.AlertSwap{New: other}); !held[0] || !held[1] || !held[2] {
			t.Fatalf("inserts held %v, want all", held)
		}
		again := alert("parked", "unknown_event", 9, 1, t0.Add(time.Hour))
		if held := swap(t, m, inbox.AlertSwap{New: again}); held[0] {
			t.Error("an insert over an existing finding held")
		}
		got := read(t, m, "parked")
		if len(got) != 2 || got[0] != *b || got[1] != *a {
			t.Fatalf("alerts of parked = %+v, want %+v and %+v, by finding", got, *b, *a)
		}

		grown := alert("parked", "unknown_event", 4, 2, t0.Add(time.Minute))
		stale := alert("parked", "unknown_event", 8, 2, t0.Add(2*time.Minute))
		if held := swap(t, m, inbox.AlertSwap{Old: a, New: grown}, inbox.AlertSwap{Old: a, New: stale}); !held[0] || held[1] {
			t.Fatalf("two updates of one read held %v, want the first only", held)
		}
		if held := swap(t, m, inbox.AlertSwap{Old: a}, inbox.AlertSwap{Old: b}); held[0] || !held[1] {
			t.Fatalf("deletes held %v, want the stale one refused and the current one done", held)
		}
		if got := read(t, m, "parked"); len(got) != 1 || got[0] != *grown {
			t.Errorf("alerts of parked = %+v, want %+v alone", got, *grown)
		}
		if got := read(t, m, "quiet"); len(got) != 1 || got[0] != *other {
			t.Errorf("another scope's alerts = %+v, want %+v untouched", got, *other)
		}
	})

	t.Run("of runs swapping the same row at once, one holds", func(t *testing.T) {
		t.Parallel()
		m := memory(t)
		const runs = 8
		race := func(swaps func(i int) inbox.AlertSwap) int {
			var wg sync.WaitGroup
			helds := make([]bool, runs)
			errs := make([]error, runs)
			for i := range runs {
				wg.Go(func() {
					var held []bool
					held, errs[i] = m.SwapAlerts(ctx, []inbox.AlertSwap{swaps(i)})
					helds[i] = len(held) == 1 && held[0]
				})
			}
			wg.Wait()
			n := 0
			for i := range runs {
				if errs[i] != nil {
					t.Fatal(errs[i])
				}
				if helds[i] {
					n++
				}
			}
			return n
		}
		opened := alert("down", "down app", 1, 1, t0)
		if n := race(func(int) inbox.AlertSwap { return inbox.AlertSwap{New: opened} }); n != 1 {
			t.Errorf("%d runs opened the same finding, want 1", n)
		}
		if n := race(func(i int) inbox.AlertSwap {
			return inbox.AlertSwap{Old: opened, New: alert("down", "down app", int64(i+2), 2, t0.Add(time.Hour))}
		}); n != 1 {
			t.Errorf("%d runs reported the same growth, want 1", n)
		}
		now := read(t, m, "down")
		if len(now) != 1 || now[0].Rev != 2 {
			t.Fatalf("alerts = %+v, want one at rev 2", now)
		}
		if n := race(func(int) inbox.AlertSwap { return inbox.AlertSwap{Old: &now[0]} }); n != 1 {
			t.Errorf("%d runs resolved the same finding, want 1", n)
		}
		if got := read(t, m, "down"); len(got) != 0 {
			t.Errorf("alerts after the resolve = %+v, want none", got)
		}
	})
}
