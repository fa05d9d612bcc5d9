package dbaddr_test

import (
	"errors"
	"strings"
	"testing"

	"inbox/dbaddr"
)

// TestForLogs: what serve and dispatch log of an error names none of the
// store's address, user, database or password, while a destination's
// address in its own error stays.
func TestForLogs(t *testing.T) {
	const db = "postgres://inbox:hunter2@db.internal:6543/events?sslmode=disable"
	free := dbaddr.ForLogs(db)
	for _, msg := range []string{
		"open store: failed to connect to `user=inbox database=events`: db.internal:6543 (10.1.2.3): dial error: dial tcp 10.1.2.3:6543: connect: connection refused",
		"claim: read tcp 10.0.0.9:41234->10.1.2.3:6543: i/o timeout",
		"parse " + db + ": bad",
		"auth: password hunter2 refused",
	} {
		got := free(errors.New(msg))
		for _, leak := range []string{"db.internal", "6543", "10.1.2.3", "hunter2", "user=inbox", "database=events", db} {
			if strings.Contains(got, leak) {
				t.Errorf("%q logged as %q: holds %q", msg, got, leak)
			}
		}
	}
	dest := "POST http://10.0.0.5:8080/hook: dial tcp 10.0.0.5:8080: connect: connection refused"
	if got := free(errors.New(dest)); got != dest {
		t.Errorf("a destination's error logged as %q, want it whole", got)
	}
	if got := dbaddr.ForLogs("/var/lib/inbox/inbox.db")(errors.New("open /var/lib/inbox/inbox.db: denied")); got != "open /var/lib/inbox/inbox.db: denied" {
		t.Errorf("a SQLite error logged as %q, want it whole", got)
	}
}

// TestFreeOneDigitPort: a port of one digit is not taken out of the
// address that holds it, leaving half an address behind.
func TestFreeOneDigitPort(t *testing.T) {
	got := dbaddr.Free(errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), "postgres://u:p@localhost:1/test")
	if strings.Contains(got, "127.0.0") || strings.Contains(got, ":1") {
		t.Errorf("Free = %q: part of the address left", got)
	}
}
