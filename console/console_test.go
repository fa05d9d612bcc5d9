package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"inbox/console"
	"inbox/inbox"
	"inbox/scheme"
	"inbox/sqlite"
	"inbox/sqlite/sqlitetest"
)

// The hostile values a row, a refusal or a request may hold.
const (
	scriptBody = `<script>document.title="pwned"</script>`
	htmlEvent  = `<b>x</b><img src=x onerror=alert(1)>`
	quotedJob  = `q"uo'te<>&`
	htmlSource = `"><img src=x onerror=alert(2)>`
)

var rules = inbox.Rules{Events: []string{"job.completed"}, MaxBody: 1 << 20}

func put(t *testing.T, store inbox.Store, body string) inbox.Delivery {
	t.Helper()
	d := inbox.Classify("", inbox.Named{}, []byte(body), time.Now().Unix(), rules)
	if _, err := store.Put(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	return d
}

// hostileStore is a real store holding a row of each hostile kind, a
// missed key and an overdue job.
func hostileStore(t *testing.T) (*sqlite.Store, map[string]string) {
	t.Helper()
	store := sqlitetest.MustOpen(t, sqlite.Options{})
	ids := map[string]string{
		"script": put(t, store, scriptBody).Key,
		"event":  put(t, store, `{"event":"`+strings.ReplaceAll(htmlEvent, `"`, `\"`)+`","job_id":"j1"}`).Key,
		"quoted": put(t, store, `{"event":"job.completed","job_id":"q\"uo'te<>&"}`).Key,
		"binary": put(t, store, "\xff\xfe\x1b[31m<b>\u202e").Key,
		"plain":  put(t, store, `{"event":"job.completed","job_id":"job_1"}`).Key,
	}
	ctx := context.Background()
	if err := store.RecordRefusals(ctx, []inbox.Refusal{{Source: "sume", Key: quotedJob + "x", JobID: quotedJob + "x", Event: htmlEvent,
		First: time.Now(), Last: time.Now(), Count: 2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Expect(ctx, []string{`late<i>"job`}, "", time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	return store, ids
}

func newConsole(store console.Store) *console.Console {
	return console.New(store, console.Config{
		Sources: []console.Source{{Name: "sume", Path: "/webhooks/sume", Scheme: "sume", Keys: []scheme.Secret{{Key: []byte("the-secret-itself")}}}},
		DB:      "/var/lib/inbox/inbox.db",
		Now:     func() time.Time { return time.Now().Add(time.Hour) }, // the expectation is overdue by then
	}, zerolog.Nop())
}

func get(t *testing.T, h http.Handler, method, target string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	resp := rec.Result()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// markup finds what only markup that escaped the escaping would hold.
var markup = regexp.MustCompile(`(?i)<script|<img|<b>|<i>`)

// TestHostileRendersAsText renders every page over rows, ids, events and
// query values that hold markup, and checks that each shows them as text:
// no tag of theirs survives, the escaped text is there, bytes that are not
// UTF-8 are shown as escapes, and no secret appears.
func TestHostileRendersAsText(t *testing.T) {
	store, ids := hostileStore(t)
	c := newConsole(store)
	pages := map[string]string{
		"/":                                      "Parked by reason",
		"/rows":                                  "&lt;b&gt;x&lt;/b&gt;&lt;img src=x onerror=alert(1)&gt;",
		"/rows?status=parked&reason=unparseable": "unparseable",
		"/row?" + url.Values{"id": {ids["script"]}}.Encode():          "&lt;script&gt;document.title=&#34;pwned&#34;&lt;/script&gt;",
		"/row?" + url.Values{"id": {ids["event"]}}.Encode():           "&lt;b&gt;x&lt;/b&gt;",
		"/row?" + url.Values{"id": {ids["quoted"]}}.Encode():          "q&#34;uo&#39;te&lt;&gt;&amp;",
		"/row?" + url.Values{"id": {ids["binary"]}}.Encode():          "ff fe 1b 5b 33 31 6d 3c", // a hex dump
		"/rows?" + url.Values{"source": {htmlSource}}.Encode():        "value=\"&#34;&gt;&lt;img src=x onerror=alert(2)&gt;\"",
		"/row?" + url.Values{"id": {quotedJob + "<script>"}}.Encode(): "No row with id q&#34;uo&#39;te&lt;&gt;&amp;&lt;script&gt;.",
	}
	for target, want := range pages {
		resp, body := get(t, c, http.MethodGet, target)
		if resp.StatusCode != http.StatusOK && !strings.Contains(target, "<script>") && !strings.Contains(target, "%3Cscript%3E") {
			t.Errorf("GET %s: %d\n%s", target, resp.StatusCode, body)
		}
		if m := markup.FindString(body); m != "" {
			t.Errorf("GET %s: the page holds %q", target, m)
		}
		if !strings.Contains(body, want) {
			t.Errorf("GET %s: the page lacks %q:\n%s", target, want, body)
		}
		if strings.Contains(body, "the-secret-itself") {
			t.Errorf("GET %s: the page shows the secret", target)
		}
		if got := resp.Header.Get("Content-Security-Policy"); !strings.HasPrefix(got, "default-src 'none'; style-src 'self'; img-src 'self' data:;") || !strings.Contains(got, "frame-ancestors 'none'") {
			t.Errorf("GET %s: Content-Security-Policy %q", target, got)
		}
		for k, v := range map[string]string{"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"} {
			if got := resp.Header.Get(k); got != v {
				t.Errorf("GET %s: %s %q, want %q", target, k, got, v)
			}
		}
	}
	// A link to a row names its id in the query, escaped.
	_, body := get(t, c, http.MethodGet, "/rows")
	if want := `href="/row?id=q%22uo%27te%3C%3E%26"`; !strings.Contains(body, want) {
		t.Errorf("/rows lacks the link %s", want)
	}
	// The bidi override of the binary body's row is shown as an escape, and
	// the overview names the secret by its fingerprint.
	_, body = get(t, c, http.MethodGet, "/")
	for _, want := range []string{scheme.Secret{Key: []byte("the-secret-itself")}.Fingerprint(), "late&lt;i&gt;&#34;job", "q&#34;uo&#39;te&lt;&gt;&amp;x"} {
		if !strings.Contains(body, want) {
			t.Errorf("/ lacks %q", want)
		}
	}
}

// TestReadOnly checks that every method but GET and HEAD is answered 405,
// on every page, and changes nothing.
func TestReadOnly(t *testing.T) {
	store, ids := hostileStore(t)
	c := newConsole(store)
	before, err := store.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"/", "/rows", "/row?id=" + url.QueryEscape(ids["plain"]), "/console.css", "/nothing"} {
		for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions, "PURGE"} {
			resp, _ := get(t, c, m, target)
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: %d, Allow %q; want 405, GET, HEAD", m, target, resp.StatusCode, resp.Header.Get("Allow"))
			}
		}
		if resp, _ := get(t, c, http.MethodHead, target); resp.StatusCode != http.StatusOK && target != "/nothing" {
			t.Errorf("HEAD %s: %d", target, resp.StatusCode)
		}
	}
	after, err := store.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if after.ByStatus[inbox.StatusNew] != before.ByStatus[inbox.StatusNew] || after.ByStatus[inbox.StatusParked] != before.ByStatus[inbox.StatusParked] {
		t.Errorf("rows after %v, before %v", after.ByStatus, before.ByStatus)
	}
}

// TestBadFilters checks that the list page refuses what inbox list
// refuses, naming it.
func TestBadFilters(t *testing.T) {
	c := newConsole(sqlitetest.MustOpen(t, sqlite.Options{}))
	for target, want := range map[string]string{
		"/rows?status=gone":    "unknown status &#34;gone&#34;",
		"/rows?reason=%3Cb%3E": "unknown reason &#34;&lt;b&gt;&#34;",
		"/rows?limit=0":        "limit &#34;0&#34;: want 1 to 1000 rows",
		"/rows?limit=1001":     "want 1 to 1000 rows",
		"/row":                 "takes ?id=",
		"/rows?source=" + strings.Repeat("a", 65): "a source name is",
	} {
		resp, body := get(t, c, http.MethodGet, target)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, want) {
			t.Errorf("GET %s: %d, want 400 with %q:\n%s", target, resp.StatusCode, want, body)
		}
	}
}

// stalled is a store whose reads wait until they are cut off, as a hung
// database's do: the first read of the overview, or only Stats, the one
// that reads every row.
type stalled struct {
	*sqlite.Store
	onlyStats bool
}

func (s stalled) CountByStatus(ctx context.Context) (map[inbox.Status]int64, error) {
	if s.onlyStats {
		return s.Store.CountByStatus(ctx)
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

func (s stalled) Stats(ctx context.Context) (inbox.Stats, error) {
	<-ctx.Done()
	return inbox.Stats{}, ctx.Err()
}

// TestReadsAreBounded checks that a page whose store does not answer is
// answered 503 once the console's timeout has passed, saying so, and that
// an overview whose Stats alone is too slow (a large inbox) is shown
// without the rows per source and per destination, which are read last.
func TestReadsAreBounded(t *testing.T) {
	store := sqlitetest.MustOpen(t, sqlite.Options{})
	put(t, store, `{"event":"job.completed","job_id":"job_1"}`)
	c := console.New(stalled{Store: store}, console.Config{Timeout: 50 * time.Millisecond}, zerolog.Nop())
	start := time.Now()
	resp, body := get(t, c, http.MethodGet, "/")
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the page took %s", took)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "the store did not answer within 50ms") {
		t.Errorf("GET /: %d\n%s", resp.StatusCode, body)
	}
	c = console.New(stalled{Store: store, onlyStats: true}, console.Config{Timeout: 200 * time.Millisecond}, zerolog.Nop())
	resp, body = get(t, c, http.MethodGet, "/")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `id="stats-late"`) || !strings.Contains(body, `id="destinations-late"`) || !strings.Contains(body, `id="status-new">1<`) {
		t.Errorf("GET / with Stats too slow: %d\n%s", resp.StatusCode, body)
	}
}

// TestListCut checks that a list cut by its limit says how many rows the
// filter selects.
func TestListCut(t *testing.T) {
	store := sqlitetest.MustOpen(t, sqlite.Options{})
	for _, id := range []string{"a", "b", "c"} {
		put(t, store, `{"event":"job.completed","job_id":"`+id+`"}`)
	}
	_, body := get(t, newConsole(store), http.MethodGet, "/rows?status=new&limit=2")
	if !strings.Contains(body, "The newest 2 of 3 rows.") {
		t.Errorf("/rows?limit=2:\n%s", body)
	}
	if n := strings.Count(body, `href="/row?id=`); n != 2 {
		t.Errorf("/rows?limit=2 links %d rows", n)
	}
}

// TestFailedVerifications checks that the Sources table marks a source
// whose requests fail verification with none verified since, and only
// counts those of a source that verified a delivery after they began.
func TestFailedVerifications(t *testing.T) {
	store := sqlitetest.MustOpen(t, sqlite.Options{})
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour).UTC()
	fp := scheme.Secret{Key: []byte("the-secret-itself")}.Fingerprint()
	if err := store.RecordSecretUses(ctx, []inbox.SecretUse{{Source: "sume", Fingerprint: fp, LastVerified: t0}}); err != nil {
		t.Fatal(err)
	}
	if err := store.RecordUnverified(ctx, []inbox.Unverified{{Source: "sume", Count: 7, First: t0.Add(time.Minute), Last: t0.Add(2 * time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	table := func() string {
		_, body := get(t, newConsole(store), http.MethodGet, "/")
		return regexp.MustCompile(`(?s)<table id="by-source">.*?</table>`).FindString(body)
	}
	if got := table(); !strings.Contains(got, "none verified since") || !strings.Contains(got, `<span class="unverified">7</span>`) {
		t.Errorf("failing since the last verified delivery:\n%s", got)
	}
	if err := store.RecordSecretUses(ctx, []inbox.SecretUse{{Source: "sume", Fingerprint: fp, LastVerified: t0.Add(3 * time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	if got := table(); strings.Contains(got, "none verified since") || !strings.Contains(got, `<span class="unverified">7</span>`) {
		t.Errorf("a delivery verified after the failures:\n%s", got)
	}
}

// TestRowFieldsAreEventFields checks the row page gives the row's fields
// as inbox.EventFields has them, in its order, with the same text (which
// inbox show prints too).
func TestRowFieldsAreEventFields(t *testing.T) {
	store, ids := hostileStore(t)
	e, err := store.Get(context.Background(), ids["plain"])
	if err != nil {
		t.Fatal(err)
	}
	_, body := get(t, newConsole(store), http.MethodGet, "/row?id="+url.QueryEscape(ids["plain"]))
	table := regexp.MustCompile(`(?s)<table class="fields" id="fields">.*?</table>`).FindString(body)
	rows := regexp.MustCompile(`<tr><th>(.*?)</th><td>(.*?)</td></tr>`).FindAllStringSubmatch(table, -1)
	fields := inbox.EventFields()
	if len(rows) != len(fields) {
		t.Fatalf("the row page has %d fields, inbox.EventFields %d:\n%s", len(rows), len(fields), table)
	}
	for i, f := range fields {
		want := f.Text(e)
		if want == "" {
			want = "-"
		}
		if rows[i][1] != f.Name || rows[i][2] != want {
			t.Errorf("field %d is %s %q, want %s %q", i, rows[i][1], rows[i][2], f.Name, want)
		}
	}
}

// TestDestinationDown: the overview marks a destination a dispatcher
// recorded down, with since when, never its cause (it may name a host),
// and a paused one as paused rather than down.
func TestDestinationDown(t *testing.T) {
	store := sqlitetest.MustOpen(t, sqlite.Options{})
	ctx := context.Background()
	if err := store.SetDown(ctx, "billing", time.Now().Add(-2*time.Minute), "Post \"http://app.internal\": connection refused"); err != nil {
		t.Fatal(err)
	}
	row := func(name string) string {
		_, body := get(t, newConsole(store), http.MethodGet, "/")
		return regexp.MustCompile(`<td id="dest-` + name + `-paused">.*?</td>`).FindString(body)
	}
	if got := row("billing"); !strings.Contains(got, `id="dest-billing-down">down</span>`) || strings.Contains(got, "app.internal") {
		t.Errorf("down: %q", got)
	}
	if err := store.SetPaused(ctx, "billing", true); err != nil {
		t.Fatal(err)
	}
	if got := row("billing"); !strings.Contains(got, "paused") || strings.Contains(got, "down") {
		t.Errorf("paused while down: %q", got)
	}
}

// TestOverviewReplica shows the replica's URL, lag and last success on
// the overview, its error while it cannot be reached, as text; without
// one, no line.
func TestOverviewReplica(t *testing.T) {
	store := sqlitetest.MustOpen(t, sqlite.Options{})
	last := time.Date(2026, 1, 2, 9, 0, 0, 0, time.UTC)
	rep := console.Replica{URL: "s3://bucket/<b>inbox", Lag: 1500 * time.Millisecond, LastSuccess: last, Errors: 3, Error: "dial <b>refused"}
	c := console.New(store, console.Config{Replica: func() console.Replica { return rep }}, zerolog.Nop())
	_, body := get(t, c, http.MethodGet, "/")
	for _, want := range []string{`id="replica"`, "s3://bucket/&lt;b&gt;inbox", "1.5s", "2026-01-02 09:00:00Z", "cannot be reached", "dial &lt;b&gt;refused"} {
		if !strings.Contains(body, want) {
			t.Errorf("overview lacks %q:\n%s", want, body)
		}
	}
	if markup.MatchString(body) {
		t.Errorf("overview holds markup of the replica's:\n%s", body)
	}
	_, body = get(t, newConsole(store), http.MethodGet, "/")
	if strings.Contains(body, `id="replica"`) {
		t.Error("overview shows a replica line without a replica")
	}
}
