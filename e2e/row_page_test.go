package e2e

import (
	"encoding/hex"
	"html"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRowPageIsShow and TestRowPageIsShowPostgres: serve, fresh, takes a
// delivery; at once the console's overview shows its secret last used
// then. The row is handed to a destination and replayed, a delivery of
// another event for the same job is parked beside it (conflict). Then the
// row page of each row, read in a real browser, holds the same lines as
// inbox show prints, table by table and cell by cell, and the same body;
// the job's row and the conflict link to each other, in both; and the
// destination's name leads to the rows page of that destination's rows,
// which are the ones inbox list --destination lists.
func TestRowPageIsShow(t *testing.T) {
	t.Parallel()
	testRowPageIsShow(t, filepath.Join(t.TempDir(), "inbox.db"), inBrowser(t))
}

// TestRowPageIsShowPostgres is TestRowPageIsShow on PostgreSQL, reading
// the pages as served (see asServed).
func TestRowPageIsShowPostgres(t *testing.T) {
	t.Parallel()
	testRowPageIsShow(t, pgSchema(t), asServed)
}

func testRowPageIsShow(t *testing.T, db string, read pageReader) {
	app := newDestApp(t, http.StatusNoContent)
	cfg := writeConfig(t, t.TempDir(), sumeSourceTOML+`
[[destination]]
name = "app"
url = "`+app.URL+`"
`)
	srv := startServer(t, db, "--config", cfg, "--admin-addr", "127.0.0.1:0")
	client := &http.Client{Timeout: 10 * time.Second}
	sent := time.Now().UTC().Truncate(time.Second)
	if got := send(t, client, srv.url, `{"event":"job.completed","job_id":"job_r","status":"COMPLETED"}`, e2eSecret); got != http.StatusNoContent {
		t.Fatalf("delivery: %d", got)
	}

	// The secret's last use, read from serve itself: it saves its uses
	// to the store only once a minute.
	overview := read.must(t, srv.admin+"/")
	fp := hex.EncodeToString(sha(e2eSecret)[:4])
	var lastUsed string
	for _, tr := range regexp.MustCompile(`(?s)<tr>.*?</tr>`).FindAllString(regexp.MustCompile(`(?s)<table id="secrets">.*?</table>`).FindString(overview), -1) {
		if strings.Contains(tr, fp) {
			cells := regexp.MustCompile(`(?s)<td[^>]*>(.*?)</td>`).FindAllStringSubmatch(tr, -1)
			lastUsed = cells[len(cells)-1][1]
		}
	}
	if at, err := time.Parse("2006-01-02 15:04:05Z", lastUsed); err != nil || at.Before(sent) || at.After(time.Now().Add(time.Second)) {
		t.Errorf("the secrets table shows the secret last used %q, want the delivery's time (%s or within seconds after), as serve knows it", lastUsed, sent.Format(time.RFC3339))
	}

	// job_r is handed on, then replayed: its pair has an earlier series.
	waitLong(t, 20*time.Second, "app to take job_r", func() bool { return destinationStats(t, db)["app"].ByStatus["done"] == 1 })
	if out, errOut, code := runCLI(t, nil, "replay", "--db", db, "job_r"); code != 0 {
		t.Fatalf("inbox replay job_r: exit %d: %s%s", code, out, errOut)
	}
	waitLong(t, 20*time.Second, "app to take job_r again", func() bool {
		return app.requests() == 2 && destinationStats(t, db)["app"].ByStatus["done"] == 1
	})
	conflict := `{"event":"job.failed","job_id":"job_r","status":"ERROR"}`
	for _, b := range []string{conflict, `{"event":"job.completed","job_id":"job_s","status":"COMPLETED"}`} {
		if got := send(t, client, srv.url, b, e2eSecret); got != http.StatusNoContent {
			t.Fatalf("delivery %s: %d", b, got)
		}
	}
	conflictID := "sha256:" + hex.EncodeToString(sha(conflict))
	waitLong(t, 20*time.Second, "app to take job_s", func() bool { return destinationStats(t, db)["app"].ByStatus["done"] == 2 })

	pages := map[string]string{}
	for _, id := range []string{"job_r", conflictID} {
		out, errOut, code := runCLI(t, nil, "show", "--db", db, id)
		if code != 0 {
			t.Fatalf("inbox show %s: exit %d: %s", id, code, errOut)
		}
		pages[id] = read.must(t, srv.admin+"/row?id="+url.QueryEscape(id))
		compareRowPage(t, id, out, pages[id])
		if !strings.Contains(out, "series 1: 1 attempt, done ") && id == "job_r" {
			t.Errorf("inbox show job_r has no earlier series:\n%s", out)
		}
	}

	// The job's rows lead to each other, in show and on the page.
	for id, other := range map[string]string{"job_r": conflictID, conflictID: "job_r"} {
		if href := `href="/row?id=` + url.QueryEscape(other) + `"`; !strings.Contains(pages[id], href) {
			t.Errorf("the row page of %s does not link to %s (%s):\n%s", id, other, href, pages[id])
		}
	}
	// The destination's name leads to its rows, as inbox list selects them.
	href := regexp.MustCompile(`<a href="(/rows\?[^"]*)">app</a>`).FindStringSubmatch(pages["job_r"])
	if href == nil {
		t.Fatalf("the row page of job_r does not link the destination app to its rows:\n%s", pages["job_r"])
	}
	rows := read.must(t, srv.admin+html.UnescapeString(href[1]))
	var listed []string
	for _, m := range regexp.MustCompile(`href="/row\?id=([^"]*)"`).FindAllStringSubmatch(rows, -1) {
		id, err := url.QueryUnescape(html.UnescapeString(m[1]))
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, id)
	}
	slices.Sort(listed)
	out, errOut, code := runCLI(t, nil, "list", "--db", db, "--json", "--destination", "app")
	if code != 0 {
		t.Fatalf("inbox list --destination app: exit %d: %s", code, errOut)
	}
	if want := jsonIDs(t, out); !slices.Equal(listed, want) || !slices.Equal(want, []string{"job_r", "job_s"}) {
		t.Errorf("the rows page of app (%s) lists %v; inbox list --destination app %v, want job_r and job_s", href[1], listed, want)
	}
}

// compareRowPage checks that the row page dom shows what inbox show
// printed (shown): the same tables in the same order, each line's cells
// the same text (headings in capitals in show), then the same body.
func compareRowPage(t *testing.T, id, shown, dom string) {
	t.Helper()
	blocks := strings.Split(shown, "\n\n")
	part := regexp.MustCompile(`(?s)<table[^>]*>.*?</table>|<p class="(?:empty|hint)" id="[^"]*-(?:empty|note)">.*?</p>`)
	cellRe := regexp.MustCompile(`(?s)<(t[hd])[^>]*>(.*?)</t[hd]>`)
	tag := regexp.MustCompile(`<[^>]*>`)
	text := func(s string) string { return strings.TrimSpace(html.UnescapeString(tag.ReplaceAllString(s, ""))) }
	main := dom[strings.Index(dom, "<main>"):]
	parts := part.FindAllString(main, -1)
	var paged []string
	for _, p := range parts {
		if !strings.HasPrefix(p, "<table") {
			// A table with no line, or a table's note: a sentence on the
			// page, a parenthesis in show.
			s := strings.TrimSuffix(text(p), ".")
			line := "(" + strings.ToLower(s[:1]) + s[1:] + ")"
			if strings.Contains(p, "-note") && len(paged) > 0 {
				paged[len(paged)-1] += "\n" + line
			} else {
				paged = append(paged, line)
			}
			continue
		}
		var lines []string
		for _, tr := range regexp.MustCompile(`(?s)<tr>.*?</tr>`).FindAllString(p, -1) {
			var cells []string
			head := strings.Contains(p, "<thead>") && strings.Index(p, tr) < strings.Index(p, "</thead>")
			for _, c := range cellRe.FindAllStringSubmatch(tr, -1) {
				v := text(c[2])
				if head {
					v = strings.ToUpper(v)
				}
				cells = append(cells, v)
			}
			lines = append(lines, strings.Join(cells, " | "))
		}
		paged = append(paged, strings.Join(lines, "\n"))
	}
	if len(paged) < 2 || len(blocks) <= len(paged) {
		t.Errorf("%s: the row page has %d tables, inbox show %d blocks:\n%s\n%s", id, len(paged), len(blocks), shown, main)
		return
	}
	split := regexp.MustCompile(`\s{2,}`)
	for i, want := range paged {
		var lines []string
		for _, line := range strings.Split(strings.TrimRight(blocks[i], "\n"), "\n") {
			lines = append(lines, strings.Join(split.Split(strings.TrimSpace(line), -1), " | "))
		}
		if got := strings.Join(lines, "\n"); got != want {
			t.Errorf("%s: table %d:\ninbox show:\n%s\nthe row page:\n%s", id, i+1, got, want)
		}
	}
	body := regexp.MustCompile(`(?s)<pre class="body" id="body">(.*?)</pre>`).FindStringSubmatch(main)
	if rest := strings.TrimSpace(strings.Join(blocks[len(paged):], "\n\n")); body == nil || rest != strings.TrimSpace(html.UnescapeString(body[1])) {
		t.Errorf("%s: after its tables inbox show prints\n%s\nand the row page's body is\n%v", id, rest, body)
	}
}
