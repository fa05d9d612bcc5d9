package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	stdhtml "html"
	"image"
	"image/png"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// chromiumPath returns the headless browser the console tests drive,
// Debian's chromium. Without it the tests skip, or fail in CI (CI=true)
// and with INBOX_REQUIRE_BROWSER=1.
func chromiumPath(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err == nil {
		return path
	}
	if os.Getenv("CI") == "true" || os.Getenv("INBOX_REQUIRE_BROWSER") == "1" {
		t.Fatalf("no chromium on PATH (apt-get install chromium): %v", err)
	}
	t.Skip("no chromium on PATH: apt-get install chromium, or set INBOX_REQUIRE_BROWSER=1 to fail instead")
	return ""
}

// chromium runs the headless browser on pageURL with args (--dump-dom,
// --screenshot=...), in a new empty profile, and returns what it printed.
// It touches nothing beyond the page: no first-run, sync, component or
// background requests.
func chromium(t *testing.T, pageURL string, args ...string) string {
	t.Helper()
	out, err := runChromium(chromiumPath(t), t.TempDir(), pageURL, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// runChromium is chromium, with the browser at bin and its profile in dir,
// returning what failed rather than failing a test: it may run beside
// others of its kind.
func runChromium(bin, dir, pageURL string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	argv := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir=" + filepath.Join(dir, "profile")}, args...)
	cmd := exec.CommandContext(ctx, bin, append(argv, pageURL)...)
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir, "XDG_CACHE_HOME="+dir)
	// The browser's own processes go with it when the time is up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("chromium %s: %v\n%s", pageURL, err, stderr.String())
	}
	return stdout.String(), nil
}

// pageReader reads a console page as the tests look at it: its DOM after
// a real browser ran it, or, where what is checked is the store's side of
// the page, its HTML as served.
type pageReader func(pageURL string) (string, error)

// inBrowser reads a page's DOM through headless chromium: one browser,
// started at the first page, for every page the test reads, each in a tab
// of its own.
func inBrowser(t *testing.T) pageReader {
	bin := chromiumPath(t)
	dir := t.TempDir()
	start := sync.OnceValues(func() (*browser, error) { return startBrowser(t, bin, dir) })
	return func(pageURL string) (string, error) {
		b, err := start()
		if err != nil {
			return "", err
		}
		return b.dom(pageURL)
	}
}

// asServed reads a page's HTML as served, without a browser: the checks
// that run the page in a browser (no script of a row's runs, no element
// of its exists) are the store's business on no store, and run on SQLite.
func asServed(pageURL string) (string, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(pageURL)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", pageURL, resp.Status)
	}
	return string(b), err
}

// must is read's page, failing the test when it cannot be read.
func (read pageReader) must(t *testing.T, pageURL string) string {
	t.Helper()
	page, err := read(pageURL)
	if err != nil {
		t.Fatal(err)
	}
	return page
}

// TestConsoleSQLite drives the console in a real browser over a SQLite
// inbox.
func TestConsoleSQLite(t *testing.T) {
	t.Parallel()
	testConsole(t, filepath.Join(t.TempDir(), "inbox.db"), true)

	// Without --admin-addr the probes share the webhook address, and the
	// console is not served at all.
	srv := startServer(t, filepath.Join(t.TempDir(), "inbox.db"))
	for path, want := range map[string]int{"/": 404, "/rows": 404, "/healthz": 200} {
		if got := methodStatus(t, http.MethodGet, srv.admin+path); got != want {
			t.Errorf("GET %s without --admin-addr: %d, want %d", path, got, want)
		}
	}
}

// TestConsolePostgres is TestConsoleSQLite on PostgreSQL, reading the
// pages as served: what the browser adds is the same on either store.
func TestConsolePostgres(t *testing.T) {
	t.Parallel()
	testConsole(t, pgSchema(t), false)
}

// The hostile deliveries: a body whose script would retitle the page and
// add an element, an event name and a job id holding markup and quotes,
// bytes that are not UTF-8.
const (
	consoleScript = `<script>document.title="pwned";document.body.appendChild(document.createElement("p")).id="pwned"</script>`
	consoleEvent  = `<b id="inj-event">x</b><img src=x onerror=alert(1)>`
	consoleJob    = `q"uo'te<i id="inj-job">`
	consoleSource = `"><b id="inj-source">x</b><img src=x onerror=alert(2)>`
	consoleBinary = "\xff\xfe\x00bin\x1b[31m"
	// consoleArrived is the chart's color for the rows received in an hour.
	consoleArrived = 0x3b82c4
)

// testConsole drives the console over db, in a browser or as served.
func testConsole(t *testing.T, db string, inChromium bool) {
	read := pageReader(asServed)
	if inChromium {
		read = inBrowser(t)
	}
	// Three destinations: one takes every row, one rejects every row (its
	// pairs parked), one is paused (its pairs wait).
	app, reject := newDestApp(t, http.StatusNoContent), newDestApp(t, http.StatusUnprocessableEntity)
	cfg := writeConfig(t, t.TempDir(), sumeSourceTOML+`
[[destination]]
name = "app"
url = "`+app.URL+`"

[[destination]]
name = "reject"
url = "`+reject.URL+`"

[[destination]]
name = "held"
url = "`+app.URL+`"
`)
	srv := startServer(t, db, "--config", cfg, "--admin-addr", "127.0.0.1:0")
	pause(t, srv, db, "held")
	client := &http.Client{Timeout: 10 * time.Second}
	bodies := []string{consoleScript, consoleBinary,
		`{"event":` + strconv.Quote(consoleEvent) + `,"job_id":"job_hostile"}`,
		`{"event":"job.completed","job_id":` + strconv.Quote(consoleJob) + `}`}
	for i := range 12 {
		bodies = append(bodies, `{"event":"job.completed","job_id":"job_`+strconv.Itoa(i)+`"}`)
	}
	for _, b := range bodies {
		if got := send(t, client, srv.url, b, e2eSecret); got != http.StatusNoContent {
			t.Fatalf("delivery %q: %d", b, got)
		}
	}
	// The 13 job.completed rows are routed to each destination; the three
	// others were parked on receipt.
	waitLong(t, 20*time.Second, "app and reject to settle every row", func() bool {
		st := destinationStats(t, db)
		return st["app"].ByStatus["done"] == 13 && st["reject"].ByStatus["parked"] == 13 && st["held"].ByStatus["new"] == 13
	})
	// Then the sender's secret rotates and serve's does not.
	for range 2 {
		if got := send(t, client, srv.url, `{"event":"job.completed","job_id":"job_x"}`, "whsec_rotated"); got != http.StatusUnauthorized {
			t.Fatalf("a delivery signed with another secret: %d, want 401", got)
		}
	}
	// A stop saves when the secret last verified, and the failures; the
	// console shows them. The next serve hands nothing on: the pairs stay
	// as they are while the pages are read.
	srv.signal(syscall.SIGTERM)
	<-srv.done
	srv = startServer(t, db, "--admin-addr", "127.0.0.1:0")

	stats := consoleStats(t, db)
	dom := read.must(t, srv.admin+"/")
	for id, want := range map[string]int64{
		"status-new": stats.ByStatus["new"], "status-done": stats.ByStatus["done"],
		"status-parked": stats.ByStatus["parked"], "status-ignored": stats.ByStatus["ignored"],
		"queue-depth": stats.Queue.Depth, "parked": stats.ByStatus["parked"],
	} {
		if got := pageNumber(t, dom, id); got != want {
			t.Errorf("the overview's %s is %d, inbox stats --json says %d", id, got, want)
		}
	}
	if len(stats.ByReason) != 2 {
		t.Errorf("inbox stats --json parks by %v, want unparseable and unknown_event", stats.ByReason)
	}
	for reason, n := range stats.ByReason {
		if got := pageNumber(t, dom, "reason-"+reason); got != n {
			t.Errorf("the overview parks %d %s, inbox stats --json %d", got, reason, n)
		}
	}
	// Each destination's pairs by status, and whether it is paused, as
	// inbox stats --json counts them.
	dests := destinationStats(t, db)
	if len(dests) != 4 {
		t.Errorf("inbox stats --json has destinations %v, want app, reject and held", dests)
	}
	for name, d := range dests {
		if name == "" {
			continue
		}
		for status, want := range map[string]int{"new": d.ByStatus["new"], "done": d.ByStatus["done"], "parked": d.ByStatus["parked"], "in-flight": d.InFlight, "retrying": d.Retrying} {
			if got := pageNumber(t, dom, "dest-"+name+"-"+status); got != int64(want) {
				t.Errorf("the overview shows destination %s with %d %s, inbox stats --json %d", name, got, status, want)
			}
		}
		paused := regexp.MustCompile(`id="dest-` + name + `-paused">(.*?)</td>`).FindStringSubmatch(dom)
		if paused == nil || strings.Contains(paused[1], "paused") != d.Paused {
			t.Errorf("the overview shows destination %s paused as %q, inbox stats --json says paused %v", name, paused, d.Paused)
		}
	}
	if dests["held"].ByStatus["new"] != 13 || !dests["held"].Paused || dests["reject"].ByStatus["parked"] != 13 || dests["app"].ByStatus["done"] != 13 {
		t.Errorf("inbox stats --json: %+v, want app's 13 done, reject's 13 parked, held's 13 new and paused", dests)
	}
	// The source whose deliveries now fail verification, none verified since.
	bySource := regexp.MustCompile(`(?s)<table id="by-source">.*?</table>`).FindString(dom)
	if !strings.Contains(bySource, "none verified since") || !strings.Contains(bySource, `<span class="unverified">2</span>`) {
		t.Errorf("the sources table does not show sume's 2 failed verifications, none verified since:\n%s", bySource)
	}

	sum := sha256.Sum256([]byte(e2eSecret))
	secrets := regexp.MustCompile(`(?s)<table id="secrets">.*?</table>`).FindString(dom)
	if !strings.Contains(secrets, hex.EncodeToString(sum[:4])) || strings.Contains(secrets, "never") {
		t.Errorf("the secrets table does not show the secret's fingerprint used:\n%s", secrets)
	}
	if strings.Contains(dom, e2eSecret) {
		t.Error("the overview shows the secret")
	}

	// Hostile values are text: no script ran, no element of theirs exists,
	// their text shows escaped.
	scriptID := "sha256:" + hex.EncodeToString(sha(consoleScript))
	binaryID := "sha256:" + hex.EncodeToString(sha(consoleBinary))
	hostile := map[string]string{
		"/row?id=" + url.QueryEscape(scriptID):           `&lt;script&gt;document.title="pwned";`,
		"/row?id=" + url.QueryEscape(binaryID):           "ff fe 00 62 69 6e 1b 5b",
		"/row?id=" + url.QueryEscape(consoleJob):         `q"uo'te&lt;i id="inj-job"&gt;`,
		"/rows?status=parked":                            `&lt;b id="inj-event"&gt;x&lt;/b&gt;`,
		"/rows?source=" + url.QueryEscape(consoleSource): `value="&quot;&gt;&lt;b id=&quot;inj-source`,
	}
	// The pages are read at once (each by a browser of its own).
	type pageRead struct {
		dom string
		err error
	}
	reads := map[string]chan pageRead{}
	for page := range hostile {
		c := make(chan pageRead, 1)
		reads[page] = c
		go func() {
			dom, err := read(srv.admin + page)
			c <- pageRead{dom, err}
		}()
	}
	doms, browserFailed := map[string]string{}, false
	for page, c := range reads { // every browser done before the test stops
		r := <-c
		if r.err != nil {
			t.Error(r.err)
			browserFailed = true
		}
		doms[page] = r.dom
	}
	if browserFailed {
		t.FailNow()
	}
	for page, want := range hostile {
		dom := doms[page]
		title := regexp.MustCompile(`<title>(.*?)</title>`).FindStringSubmatch(dom)
		if title == nil || !strings.HasPrefix(title[1], "inbox console: ") {
			t.Fatalf("%s: title %q", page, title)
		}
		// The title's text is serialized unescaped; the rest shows a tag
		// only where there is an element.
		body := strings.Replace(dom, title[0], "", 1)
		for _, injected := range []string{`<p id="pwned"`, `<b id="inj-event"`, `<i id="inj-job"`, `<b id="inj-source"`, "<img"} {
			if strings.Contains(body, injected) {
				t.Errorf("%s: the page's DOM holds %s:\n%s", page, injected, dom)
			}
		}
		shown := strings.Contains(dom, want) || strings.Contains(dom, strings.ReplaceAll(want, `&lt;`, `<`))
		if !inChromium { // the HTML as served escapes quotes too
			shown = strings.Contains(stdhtml.UnescapeString(dom), stdhtml.UnescapeString(want))
		}
		if !shown {
			t.Errorf("%s: the page's DOM lacks %s:\n%s", page, want, dom)
		}
		_, html := get(t, srv.admin+page)
		if m := regexp.MustCompile(`(?i)(src|href|action)\s*=\s*["']?\s*(https?:)?//`).FindString(html); m != "" {
			t.Errorf("%s: the page loads from elsewhere: %s", page, m)
		}
	}

	// A row's page: its state with each destination, as inbox show --json
	// has it.
	out, errOut, code := runCLI(t, nil, "show", "--json", "--db", db, "job_0")
	var shown struct {
		Destinations []struct {
			Destination string `json:"destination"`
			Status      string `json:"status"`
			Reason      string `json:"reason"`
			Attempts    int64  `json:"attempts"`
		} `json:"destinations"`
	}
	if err := json.Unmarshal([]byte(out), &shown); code != 0 || err != nil || len(shown.Destinations) != 3 {
		t.Fatalf("inbox show --json job_0: exit %d, %v, %s %s; want its 3 destinations", code, err, out, errOut)
	}
	rowDOM := read.must(t, srv.admin+"/row?id=job_0")
	for _, d := range shown.Destinations {
		if got := pageNumber(t, rowDOM, "pair-"+d.Destination+"-attempts"); got != d.Attempts {
			t.Errorf("the row page shows %d attempts for %s, inbox show %d", got, d.Destination, d.Attempts)
		}
		want := d.Status
		if d.Reason != "" {
			want += " (" + d.Reason + ")"
		}
		if got := regexp.MustCompile(`id="pair-` + d.Destination + `-status">(.*?)<`).FindStringSubmatch(rowDOM); got == nil || got[1] != want {
			t.Errorf("the row page shows %s as %q, inbox show %q", d.Destination, got, want)
		}
	}

	// The screenshot: not blank, and the chart drawn.
	if inChromium {
		shot := filepath.Join(t.TempDir(), "console.png")
		chromium(t, srv.admin+"/", "--screenshot="+shot, "--window-size=1280,2000", "--hide-scrollbars")
		checkScreenshot(t, shot)
	}

	// Read-only: every other method is 405 and changes nothing; the
	// webhook address has no console.
	for _, page := range []string{"/", "/rows?status=parked", "/row?id=" + url.QueryEscape(scriptID), "/console.css"} {
		for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
			if got := methodStatus(t, m, srv.admin+page); got != http.StatusMethodNotAllowed {
				t.Errorf("%s %s: %d, want 405", m, page, got)
			}
		}
	}
	if after := consoleStats(t, db); !equalJSON(after.ByStatus, stats.ByStatus) || !equalJSON(after.ByReason, stats.ByReason) {
		t.Errorf("after the writes to the console: %v %v, before %v %v", after.ByStatus, after.ByReason, stats.ByStatus, stats.ByReason)
	}
	web := strings.TrimSuffix(srv.url, "/webhooks/sume")
	for _, page := range []string{"/", "/rows", "/row?id=" + url.QueryEscape(scriptID), "/console.css"} {
		if got := methodStatus(t, http.MethodGet, web+page); got != http.StatusNotFound {
			t.Errorf("GET %s on the webhook address: %d, want 404", page, got)
		}
	}
}

type consoleStatsJSON struct {
	ByStatus map[string]int64 `json:"by_status"`
	ByReason map[string]int64 `json:"parked_by_reason"`
	Queue    struct {
		Depth int64 `json:"depth"`
	} `json:"queue"`
}

func consoleStats(t *testing.T, db string) consoleStatsJSON {
	t.Helper()
	out, errOut, code := runCLI(t, nil, "stats", "--json", "--db", db)
	if code != 0 {
		t.Fatalf("inbox stats --json: exit %d: %s", code, errOut)
	}
	var st consoleStatsJSON
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("inbox stats --json: %v: %s", err, out)
	}
	return st
}

// pageNumber reads the number the element with id shows (2,345 for
// 2345).
func pageNumber(t *testing.T, dom, id string) int64 {
	t.Helper()
	m := regexp.MustCompile(`id="` + regexp.QuoteMeta(id) + `">([0-9,]+)<`).FindStringSubmatch(dom)
	if m == nil {
		t.Errorf("no number with id %s on the page", id)
		return -1
	}
	n, _ := strconv.ParseInt(strings.ReplaceAll(m[1], ",", ""), 10, 64)
	return n
}

// checkScreenshot decodes the PNG at file and fails unless it holds many
// colors (not a blank or one-color page) and the chart's bars: a block of
// the received-rows color taller than the legend's swatch.
func checkScreenshot(t *testing.T, file string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	b := img.Bounds()
	if b.Dx() != 1280 || b.Dy() != 2000 {
		t.Errorf("screenshot is %dx%d, want 1280x2000", b.Dx(), b.Dy())
	}
	colors := map[uint32]bool{}
	var bars int
	box := image.Rectangle{Min: b.Max, Max: b.Min}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			c := r>>8<<16 | g>>8<<8 | bl>>8
			colors[c] = true
			if c == consoleArrived {
				bars++
				box = box.Union(image.Rect(x, y, x+1, y+1))
			}
		}
	}
	if len(colors) < 32 {
		t.Errorf("screenshot has %d colors: blank?", len(colors))
	}
	if bars < 1000 || box.Dy() < 100 {
		t.Errorf("screenshot has %d pixels of the chart's #%06x in %v: want the bars drawn", bars, consoleArrived, box)
	}
}

func sha(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

func methodStatus(t *testing.T, method, u string) int {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}
