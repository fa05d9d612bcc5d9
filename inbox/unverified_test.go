package inbox_test

import (
	"slices"
	"testing"
	"time"

	"inbox/inbox"
)

func TestBrokenRotations(t *testing.T) {
	at := func(min int) time.Time { return time.Date(2026, 1, 1, 0, min, 0, 0, time.UTC) }
	run := func(source string, n int64, first, last int) inbox.Unverified {
		return inbox.Unverified{Source: source, Count: n, First: at(first), Last: at(last)}
	}
	use := func(source string, min int) inbox.SecretUse {
		return inbox.SecretUse{Source: source, Fingerprint: "f-" + source, LastVerified: at(min)}
	}
	runs := []inbox.Unverified{
		run("broken", 40, 10, 55), // verified last at 5, failing since 10
		run("busy", 3, 20, 50),    // forgeries among deliveries verified until 58
		run("never", 2, 30, 56),   // never verified
		run("old", 9, 1, 8),       // failing, but not since 30
		run("few", 1, 40, 57),     // one failure: under min 2
	}
	uses := []inbox.SecretUse{use("broken", 5), use("busy", 58), use("busy", 1), use("old", 0), use("few", 2)}
	got := inbox.BrokenRotations(runs, uses, at(30), 2)
	var names []string
	for _, b := range got {
		names = append(names, b.Source)
	}
	if want := []string{"broken", "never"}; !slices.Equal(names, want) {
		t.Fatalf("got %v, want %v", names, want)
	}
	if !got[0].LastVerified.Equal(at(5)) || !got[1].LastVerified.IsZero() {
		t.Errorf("last verified: got %v and %v, want %v and never", got[0].LastVerified, got[1].LastVerified, at(5))
	}
	// A delivery verified the moment the run began ends it.
	if got := inbox.BrokenRotations([]inbox.Unverified{run("x", 5, 10, 20)}, []inbox.SecretUse{use("x", 10)}, at(0), 1); len(got) != 0 {
		t.Errorf("verified at the first failure: got %v, want none", got)
	}
}
