package admin

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestSendBodyFileTakesNoSampleFlags: --event or --job-id beside
// --body-file would be silently ignored; it is refused, and nothing is sent.
func TestSendBodyFileTakesNoSampleFlags(t *testing.T) {
	t.Parallel()
	var posts atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	body := filepath.Join(t.TempDir(), "body.json")
	if err := os.WriteFile(body, []byte(completed("job_1")), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, extra := range [][]string{{"--event", "job.exploded"}, {"--job-id", "job_2"}} {
		args := append([]string{"send", "--url", srv.URL, "--secret", "s", "--body-file", body}, extra...)
		if _, err := run(t, args...); err == nil || !strings.Contains(err.Error(), "do not apply") {
			t.Errorf("%v: err = %v, want --event and --job-id refused", extra, err)
		}
	}
	if n := posts.Load(); n != 0 {
		t.Errorf("%d deliveries sent, want none", n)
	}
	if out, err := run(t, "send", "--url", srv.URL, "--secret", "s", "--body-file", body); err != nil || out != "204 No Content\n" {
		t.Errorf("--body-file alone: %v, %q", err, out)
	}
}
