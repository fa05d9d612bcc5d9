package console_test

import (
	"context"
	"net/http"
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

// TestJobRowsLinked checks that a job's row and the deliveries kept
// beside it (a conflict, a poison repeat) link to each other's pages, and
// that the rows page lists a job's rows.
func TestJobRowsLinked(t *testing.T) {
	store := sqlitetest.MustOpen(t, sqlite.Options{})
	put(t, store, `{"event":"job.completed","job_id":"job_1"}`)
	conflict := put(t, store, `{"event":"job.failed","job_id":"job_1"}`)
	put(t, store, `{"event":"job.completed","job_id":"job_2"}`)
	c := newConsole(store)
	conflictID := inbox.BodyKey(conflict.SHA256) // parked beside job_1's row
	page := func(id string) string {
		t.Helper()
		resp, body := get(t, c, http.MethodGet, "/row?id="+url.QueryEscape(id))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/row?id=%s: %d", id, resp.StatusCode)
		}
		return regexp.MustCompile(`(?s)<table id="job">.*?</table>`).FindString(body)
	}
	for id, want := range map[string]string{"job_1": conflictID, conflictID: "job_1"} {
		job := page(id)
		if !strings.Contains(job, `href="/row?id=`+url.QueryEscape(want)+`"`) {
			t.Errorf("the page of %s does not link to %s:\n%s", id, want, job)
		}
		if strings.Contains(job, "job_2") {
			t.Errorf("the page of %s links to job_2, another job's row:\n%s", id, job)
		}
	}
	if job := page("job_2"); job != "" {
		t.Errorf("job_2 has no other row, but its page lists\n%s", job)
	}
	_, body := get(t, c, http.MethodGet, "/rows?job=job_1")
	if n := strings.Count(body, `href="/row?id=`); n != 2 || !strings.Contains(body, url.QueryEscape(conflictID)) {
		t.Errorf("/rows?job=job_1 links %d rows, want job_1 and its conflict:\n%s", n, body)
	}
}

// TestRowsOfDestination checks that the rows page selects by destination
// as inbox list --destination does: rows no destination has taken are
// routed to none.
func TestRowsOfDestination(t *testing.T) {
	store := sqlitetest.MustOpen(t, sqlite.Options{})
	put(t, store, `{"event":"job.completed","job_id":"job_1"}`)
	c := newConsole(store)
	if _, body := get(t, c, http.MethodGet, "/rows"); !strings.Contains(body, "job_1") {
		t.Fatalf("/rows lacks job_1:\n%s", body)
	}
	_, body := get(t, c, http.MethodGet, "/rows?destination=app")
	if strings.Contains(body, `href="/row?id=job_1"`) || !strings.Contains(body, `name="destination" value="app"`) {
		t.Errorf("/rows?destination=app lists a row routed nowhere, or forgets the filter:\n%s", body)
	}
	if resp, body := get(t, c, http.MethodGet, "/rows?destination="+strings.Repeat("a", 65)); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "a destination name is") {
		t.Errorf("a destination name too long: %d\n%s", resp.StatusCode, body)
	}
}

// TestSecretUsesLive checks that the secrets table shows the later of
// the use the store saved and the one serve holds, not yet saved.
func TestSecretUsesLive(t *testing.T) {
	store := sqlitetest.MustOpen(t, sqlite.Options{})
	key := scheme.Secret{Key: []byte("the-secret-itself")}
	saved := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	if err := store.RecordSecretUses(context.Background(), []inbox.SecretUse{{Source: "sume", Fingerprint: key.Fingerprint(), LastVerified: saved}}); err != nil {
		t.Fatal(err)
	}
	lastUsed := func(live []inbox.SecretUse) string {
		t.Helper()
		c := console.New(store, console.Config{
			Sources:    []console.Source{{Name: "sume", Path: "/webhooks/sume", Scheme: "sume", Keys: []scheme.Secret{key}}},
			SecretUses: func() []inbox.SecretUse { return live },
		}, zerolog.Nop())
		_, body := get(t, c, http.MethodGet, "/")
		row := regexp.MustCompile(`(?s)<table id="secrets">.*?<tbody>\s*<tr>(.*?)</tr>`).FindStringSubmatch(body)
		if row == nil {
			t.Fatalf("no secret in the secrets table:\n%s", body)
		}
		cells := regexp.MustCompile(`<td>(.*?)</td>`).FindAllStringSubmatch(row[1], -1)
		return cells[len(cells)-1][1]
	}
	if got := lastUsed(nil); got != "2026-12-01 09:00:00Z" {
		t.Errorf("with nothing unsaved, last used %q, want the saved use", got)
	}
	if got := lastUsed([]inbox.SecretUse{{Source: "sume", Fingerprint: key.Fingerprint(), LastVerified: saved.Add(time.Hour)}}); got != "2026-12-01 10:00:00Z" {
		t.Errorf("with a later use unsaved, last used %q, want it", got)
	}
	if got := lastUsed([]inbox.SecretUse{{Source: "sume", Fingerprint: key.Fingerprint(), LastVerified: saved.Add(-time.Hour)}}); got != "2026-12-01 09:00:00Z" {
		t.Errorf("with an earlier use unsaved (another replica saved a later one), last used %q, want the saved use", got)
	}
}
