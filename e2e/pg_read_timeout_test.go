package e2e

import (
	"context"
	"regexp"
	"testing"
	"time"

	"inbox/postgres"
)

// TestPGReconcileReadsTakeTimeout: on PostgreSQL, missed and expected read
// for as long as --timeout allows, not just the busy timeout (3 s) that
// bounds serve's own reads. While another transaction holds their tables
// locked, each waits out a --timeout of 5 s and stops with the line that
// names it, rather than failing at the busy timeout; once the lock goes,
// each reads.
func TestPGReconcileReadsTakeTimeout(t *testing.T) {
	t.Parallel()
	db := pgSchema(t)
	s, err := postgres.Open(context.Background(), db, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	conn := pgConnect(t, db)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `BEGIN; LOCK TABLE refusals, expectations IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"missed", "expected"} {
		start := time.Now()
		_, errOut, code := runCLI(t, nil, cmd, "--db", db, "--timeout", "5s")
		took := time.Since(start)
		stop := regexp.MustCompile(`^inbox: ` + cmd + `: stopped after 5s \(--timeout\): 0 rows written; raise --timeout\n$`)
		if code != 1 || !stop.MatchString(errOut) || took < 5*time.Second {
			t.Errorf("%s --timeout 5s while locked: exit %d after %v, stderr %q; want exit 1 after 5s with the stop line", cmd, code, took.Round(time.Millisecond), errOut)
		}
	}
	if _, err := conn.Exec(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"missed", "expected"} {
		if out, errOut, code := runCLI(t, nil, cmd, "--db", db, "--json"); code != 0 || out != "" {
			t.Errorf("%s once unlocked: exit %d, %q %q; want nothing listed", cmd, code, out, errOut)
		}
	}
}
