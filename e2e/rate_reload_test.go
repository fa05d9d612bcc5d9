package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReloadKeepsRate sends `inbox dispatch` 20 SIGHUPs in 4 s while a
// destination with `rate = "2/s"` has rows waiting, two reloads in three
// changing one of its knobs (so its dispatcher is restarted) and the
// third leaving it as it was: the attempts the application gets stay
// within the rate (its burst of 2, then 2 a second), as the rate's limiter
// outlives the dispatchers a reload restarts. It runs beside other tests:
// the clock starts before the dispatcher, so a loaded machine can only
// make fewer requests in the time counted, never more.
func TestReloadKeepsRate(t *testing.T) {
	t.Parallel()
	const n = 200
	db := fillDB(t, n)
	app := newRecorder(t)
	cfg := filepath.Join(t.TempDir(), "inbox.toml")
	write := func(timeout string) {
		t.Helper()
		text := "[[destination]]\nname = \"paced\"\nurl = \"" + app.URL + "\"\nrate = \"2/s\"\ntimeout = \"" + timeout + "\"\n"
		if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("5s")
	binary(t)           // built before the clock starts
	start := time.Now() // before the dispatcher, so before its limiter
	d := startDispatch(t, "--db", db, "--config", cfg, "--lease", "20s")
	waitLong(t, 20*time.Second, "the first request", func() bool { return app.requests() > 0 })
	for i := range 20 {
		switch i % 3 {
		case 0:
			write("6s")
		case 1:
			write("5s")
		}
		syscall.Kill(d.cmd.Process.Pid, syscall.SIGHUP)
		time.Sleep(200 * time.Millisecond)
	}
	elapsed := time.Since(start)
	got := app.requests()
	d.kill(syscall.SIGTERM)
	if reloads := strings.Count(d.logs.String(), "reloaded destinations"); reloads < 10 {
		t.Fatalf("%d reloads logged, want most of the 20 SIGHUPs\n%s", reloads, d.logs)
	}
	// The burst of 2 at the start, then 2 a second, and one for the edges.
	if limit := 2 + int(2*elapsed.Seconds()) + 1; got > limit {
		t.Errorf("%d requests in %s across 20 reloads, want at most %d at 2/s", got, elapsed.Round(time.Millisecond), limit)
	}
	t.Logf("%d requests in %s", got, elapsed.Round(time.Millisecond))
}
