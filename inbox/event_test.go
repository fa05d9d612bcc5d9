package inbox_test

import (
	"testing"

	"inbox/inbox"
)

// TestReasonsIsACopy: changing the list one caller got changes nothing for
// the next, nor what Valid accepts.
func TestReasonsIsACopy(t *testing.T) {
	got := inbox.Reasons()
	got[0] = "lost"
	if again := inbox.Reasons(); again[0] != inbox.ReasonUnparseable {
		t.Errorf("Reasons()[0] = %q after a caller changed its copy", again[0])
	}
	if inbox.Reason("lost").Valid() || !inbox.ReasonUnparseable.Valid() {
		t.Error("Valid follows a caller's copy")
	}
}
