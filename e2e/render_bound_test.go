package e2e

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// renderShown is how much of a rendered body inbox show and the row page
// show (docs/operating.md: the first 256 KiB).
const renderShown = 256 << 10

// hostileRenderBodies are bodies built to grow when shown: nesting whose
// indentation grows with its depth (9,000 levels of arrays indent to
// 162 MB), a wide flat array, a long string of characters that are
// shown escaped, and bytes that are not UTF-8, shown as a hex dump.
func hostileRenderBodies() map[string]string {
	const depth = 9000
	return map[string]string{
		"nested arrays":  strings.Repeat("[", depth) + strings.Repeat("]", depth),
		"nested objects": strings.Repeat(`{"k":`, depth) + "1" + strings.Repeat("}", depth),
		"mixed":          strings.Repeat(`{"a":[`, depth/2) + strings.Repeat(`]}`, depth/2),
		"wide flat":      "[" + strings.Repeat("1,", 300_000) + "1]",
		"long string":    `{"s":"` + strings.Repeat("\u202e", 150_000) + `"}`,
		"binary":         strings.Repeat("\xff\x00\x1b<", 150_000),
	}
}

// TestHostileBodyRenderBounded stores bodies that grow when rendered and
// checks that inbox show prints at most the first 256 KiB of each body's
// rendering and says it cut the rest, that the console's row page answers
// three fetches at once quickly with a bounded page, and that serve's
// memory stays small while it does.
func TestHostileBodyRenderBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "inbox.db")
	srv := startServer(t, db, "--admin-addr", "127.0.0.1:0")
	client := &http.Client{Timeout: 10 * time.Second}
	bodies := hostileRenderBodies()
	ids := map[string]string{}
	for name, b := range bodies {
		if got := send(t, client, srv.url, b, e2eSecret); got != http.StatusNoContent {
			t.Fatalf("%s: delivery answered %d", name, got)
		}
	}
	out, errOut, code := runCLI(t, nil, "list", "--db", db, "--json")
	if code != 0 {
		t.Fatalf("inbox list --json: exit %d: %s", code, errOut)
	}
	for sc := bufio.NewScanner(strings.NewReader(out)); sc.Scan(); {
		var row struct{ ID, SHA256 string }
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatal(err)
		}
		for name, b := range bodies {
			if sum := sha256.Sum256([]byte(b)); hex.EncodeToString(sum[:]) == row.SHA256 {
				ids[name] = row.ID
			}
		}
	}
	for name, b := range bodies {
		id := ids[name]
		if id == "" {
			t.Fatalf("%s: no row in inbox list --json:\n%s", name, out)
		}
		t.Run(name, func(t *testing.T) {
			showBounded(t, db, id, len(b))
			rowPageBounded(t, srv, id)
		})
	}
	hwm := peakMemory(t, srv.cmd.Process.Pid)
	t.Logf("serve's memory peaked at %d MB", hwm>>20)
	if hwm > 300<<20 {
		t.Errorf("serve's memory peaked at %d MB showing the row pages", hwm>>20)
	}
}

// showBounded runs inbox show on the row and checks its output is at most
// the shown bound plus the fields, ends saying it was cut, and that show
// --json still has the body whole.
func showBounded(t *testing.T, db, id string, size int) {
	t.Helper()
	start := time.Now()
	out, errOut, code := runCLI(t, nil, "show", "--db", db, id)
	took := time.Since(start)
	if code != 0 {
		t.Fatalf("inbox show: exit %d: %s", code, errOut)
	}
	if len(out) > renderShown+16<<10 {
		t.Errorf("inbox show printed %d bytes in %v, want at most the first 256 KiB of the body and the fields", len(out), took)
	}
	if !strings.Contains(out, "\n(truncated: the first 256 KiB shown, ") {
		t.Errorf("inbox show does not say the body was cut:\n%.300s", out[max(0, len(out)-300):])
	}
	out, _, code = runCLI(t, nil, "show", "--db", db, "--json", id)
	var row struct {
		Body       string
		BodyBase64 []byte `json:"body_base64"`
	}
	if err := json.Unmarshal([]byte(out), &row); code != 0 || err != nil || len(row.Body)+len(row.BodyBase64) != size {
		t.Errorf("inbox show --json: exit %d, %v, a body of %d bytes, want %d", code, err, len(row.Body)+len(row.BodyBase64), size)
	}
}

// rowPageBounded fetches the row's console page three times at once and
// checks each answers 200 within 5 s, with a page of bounded size that
// says the body was cut.
func rowPageBounded(t *testing.T, srv *server, id string) {
	t.Helper()
	// html/template writes a quote as &#34;: five bytes for one.
	const maxPage = 5*renderShown + 64<<10
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for range 3 {
		wg.Go(func() {
			start := time.Now()
			resp, err := http.Get(srv.admin + "/row?id=" + url.QueryEscape(id))
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			page, err := io.ReadAll(io.LimitReader(resp.Body, maxPage+1))
			took := time.Since(start)
			switch {
			case err != nil:
				errs <- err
			case resp.StatusCode != http.StatusOK:
				errs <- fmt.Errorf("answered %d", resp.StatusCode)
			case len(page) > maxPage:
				errs <- fmt.Errorf("the page is more than %d bytes (after %v)", maxPage, took)
			case took > 5*time.Second:
				errs <- fmt.Errorf("the page took %v", took)
			case !strings.Contains(string(page), `id="body-cut">Truncated: `):
				errs <- fmt.Errorf("the page does not say the body was cut")
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("/row?id=%s: %v", id, err)
	}
}

// peakMemory is the process's peak resident memory in bytes (VmHWM).
func peakMemory(t *testing.T, pid int) int64 {
	t.Helper()
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/PID/status")
	return 0
}
