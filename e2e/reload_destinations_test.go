package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
)

// reloadKeepSecret signs what destination keep posts.
const reloadKeepSecret = "whsec_cmVsb2FkLWtlZXAtc2lnbmluZy1rZXk="

// destTable is a [[destination]] table posting to url, with extra lines.
func destTable(name, url string, extra ...string) string {
	return fmt.Sprintf("[[destination]]\nname = %q\nurl = %q\n%s\n", name, url, strings.Join(extra, "\n"))
}

// liveDestinations lists the destinations in effect through inbox
// destinations --admin --json.
func liveDestinations(t *testing.T, admin string) []map[string]any {
	t.Helper()
	return cliLines(t, "destinations", "--admin", admin, "--json")
}

// names are the names of rows.
func names(rows []map[string]any) string {
	var n []string
	for _, r := range rows {
		n = append(n, fmt.Sprint(r["name"]))
	}
	return strings.Join(n, ",")
}

// onceEach reports which of ids app did not get exactly once, at attempt 1.
func onceEach(app *destApp, ids []string) []string {
	var bad []string
	for _, id := range ids {
		if a := app.attempts(id); !slices.Equal(a, []string{"1"}) {
			bad = append(bad, fmt.Sprintf("%s %v", id, a))
		}
	}
	return bad
}

// TestReloadDestinations sends SIGHUP to inbox dispatch on SQLite with a
// file that removes a destination while it has attempts under way, adds
// one and changes another's filter: the attempts under way finish, once;
// the rows stored after the reload go where the new file says; files it
// must refuse are refused with one line each and change nothing.
func TestReloadDestinations(t *testing.T) {
	t.Parallel()
	testReloadDestinations(t, filepath.Join(t.TempDir(), "inbox.db"))
}

// TestReloadDestinationsPostgres is TestReloadDestinations on PostgreSQL.
func TestReloadDestinationsPostgres(t *testing.T) {
	t.Parallel()
	testReloadDestinations(t, pgSchema(t))
}

func testReloadDestinations(t *testing.T, db string) {
	keep, gone, filt, added := newDestApp(t, 204), newDestApp(t, 204), newDestApp(t, 204), newDestApp(t, 204)
	keepT := destTable("keep", keep.URL, `secret = "`+reloadKeepSecret+`"`, `sources = ["sume"]`)
	goneT := destTable("gone", gone.URL)
	addedT := destTable("added", added.URL)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, fanOutText(keepT+goneT+destTable("filt", filt.URL, `events = ["job.completed"]`)))
	recv := startServer(t, db, "--config", fanOutConfig(t, ""))
	d := startInbox(t, []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}, "dispatch", "--db", db, "--config", cfg, "--admin-addr", "127.0.0.1:0")

	ac, af, ap := sendBatch(t, recv, "a", 3, 2, 1)
	waitLong(t, 20*time.Second, "the first rows handed on", func() bool {
		st := destinationStats(t, db)
		return st["keep"].ByStatus["done"] == 5 && st["gone"].ByStatus["done"] == 6 && st["filt"].ByStatus["done"] == 3
	})
	// gone holds its next rows' attempts open across the reload.
	gone.delay.Store(int64(3 * time.Second))
	bc, _, _ := sendBatch(t, recv, "b", 2, 0, 0)
	waitLong(t, 20*time.Second, "gone's attempts under way", func() bool { return len(gone.rows()) == 8 })

	// keep changes a knob too: its dispatcher is restarted.
	keepT = destTable("keep", keep.URL, `secret = "`+reloadKeepSecret+`"`, `sources = ["sume"]`, `workers = 2`)
	writeConfig(t, dir, fanOutText(keepT+destTable("filt", filt.URL, `events = ["job.failed"]`)+addedT))
	d.signal(syscall.SIGHUP)
	waitLog(t, d, "reloaded destinations: the rows routed from now on go by the new ones")
	cc, cf, cp := sendBatch(t, recv, "c", 2, 2, 1)
	total := 6 + 2 + 5
	waitLong(t, 30*time.Second, "every row done", func() bool {
		st := destinationStats(t, db)
		return st[""].ByStatus["done"] == total && st["gone"].ByStatus["new"] == 0
	})
	if d := destinationStats(t, db)["gone"]; d.ByStatus["done"] != 8 {
		t.Errorf("gone = %+v, want its 8 rows done: those under way at the reload finished", d)
	}
	if got, want := gone.rows(), sorted(ac, af, ap, bc); !slices.Equal(got, want) {
		t.Errorf("the removed destination got %v, want only the rows before the reload %v", got, want)
	}
	if got, want := keep.rows(), sorted(ac, af, bc, cc, cf); !slices.Equal(got, want) {
		t.Errorf("keep got %v, want the sume rows %v", got, want)
	}
	if got, want := filt.rows(), sorted(ac, bc, cf); !slices.Equal(got, want) {
		t.Errorf("filt got %v, want job.completed before the reload and job.failed after it %v", got, want)
	}
	if got, want := added.rows(), sorted(cc, cf, cp); !slices.Equal(got, want) {
		t.Errorf("added got %v, want the rows after the reload %v", got, want)
	}
	for name, app := range map[string]*destApp{"keep": keep, "gone": gone, "filt": filt, "added": added} {
		if bad := onceEach(app, app.rows()); len(bad) > 0 {
			t.Errorf("%s did not get each row once, at attempt 1: %v", name, bad)
		}
	}

	rows := liveDestinations(t, d.admin)
	if got := names(rows); got != "keep,filt,added" {
		t.Errorf("inbox destinations --admin: %s, want keep,filt,added", got)
	}
	if len(rows) == 3 && (fmt.Sprint(rows[1]["events"]) != "[job.failed]" || rows[0]["signed"] != true || rows[0]["workers"] != 2.0 || rows[2]["state"] != "dispatching") {
		t.Errorf("inbox destinations --admin: %v", rows)
	}
	if strings.Contains(d.logs.String(), `"level":"error"`) {
		t.Errorf("errors logged across the reload:\n%s", d.logs)
	}
	// The restarted and the added destination count on /metrics; the
	// removed one is gone from it once its dispatcher has ended.
	waitFor(t, "gone's dispatcher to end", func() bool {
		for _, l := range strings.Split(d.logs.String(), "\n") {
			if strings.Contains(l, `"destination":"gone"`) && strings.Contains(l, "stopped for a reload: what it held is settled") {
				return true
			}
		}
		return false
	})
	_, metrics := get(t, d.admin+"/metrics")
	for _, want := range []string{`inbox_dispatch_deliveries_total{destination="keep",outcome="done"}`, `inbox_dispatch_deliveries_total{destination="added",outcome="done"} 5`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(metrics, `destination="gone"`) {
		t.Errorf("/metrics still shows the removed destination")
	}
	out, _, _ := runCLI(t, nil, "destinations", "--admin", d.admin)
	for _, secret := range []string{reloadKeepSecret, keep.URL, gone.URL} {
		if strings.Contains(out, secret) || strings.Contains(d.logs.String(), reloadKeepSecret) {
			t.Errorf("inbox destinations or the log shows %q:\n%s", secret, out)
		}
	}
	if _, body := get(t, d.admin+"/readyz"); !strings.Contains(body, "destination added: dispatching") || strings.Contains(body, "destination gone: dispatching") {
		t.Errorf("/readyz after the reload:\n%s", body)
	}

	good := fanOutText(keepT + destTable("filt", filt.URL, `events = ["job.failed"]`) + addedT)
	for i, c := range []struct{ name, file, problem string }{
		{"bad toml", good + "\n[[destination\n", "config " + cfg},
		{"unknown key", good + destTable("more", added.URL, `worker = 3`), "unknown key"},
		{"bad url", good + destTable("more", "ftp://example.com/x"), "url must be"},
		{"duplicate name", good + destTable("added", added.URL), "name used twice"},
		{"two kinds", good + destTable("more", added.URL, `exec = "true"`), "exactly one of url, exec, nats_url"},
		{"bad secret", good + destTable("more", added.URL, `secret = "not-a-key"`), "destination 4 (more): secret: "},
	} {
		writeConfig(t, dir, c.file)
		d.signal(syscall.SIGHUP)
		if line := waitRefusal(t, d, c.name, i+1); !strings.Contains(line, c.problem) {
			t.Errorf("%s: the refusal %s does not name %q", c.name, line, c.problem)
		}
		if got := names(liveDestinations(t, d.admin)); got != "keep,filt,added" {
			t.Errorf("%s: inbox destinations --admin shows %s, want the running keep,filt,added", c.name, got)
		}
	}
	if n := strings.Count(d.logs.String(), "reloaded destinations"); n != 1 {
		t.Errorf("%d reloads put into effect, want the one valid file's", n)
	}
	dc, df, _ := sendBatch(t, recv, "d", 1, 1, 0)
	waitLong(t, 20*time.Second, "the rows after the refusals done", func() bool {
		return destinationStats(t, db)[""].ByStatus["done"] == total+2
	})
	if got, want := added.rows(), sorted(cc, cf, cp, dc, df); !slices.Equal(got, want) {
		t.Errorf("after the refusals added got %v, want %v", got, want)
	}
	if got, want := filt.rows(), sorted(ac, bc, cf, df); !slices.Equal(got, want) {
		t.Errorf("after the refusals filt got %v, want %v", got, want)
	}
	d.signal(syscall.SIGTERM)
	<-d.done
	if d.err != nil {
		t.Errorf("dispatch exited with %v\n%s", d.err, d.logs)
	}
}

// TestReloadServeDestinations sends SIGHUP to a serve that dispatches:
// a changed filter and an added destination take the rows stored after
// it; a file whose sources are good and a destination bad changes
// neither the sources nor the destinations.
func TestReloadServeDestinations(t *testing.T) {
	t.Parallel()
	one, two := newDestApp(t, 204), newDestApp(t, 204)
	dir := t.TempDir()
	db := filepath.Join(dir, "inbox.db")
	cfg := writeConfig(t, dir, fanOutText(destTable("one", one.URL, `events = ["job.completed"]`)))
	s := startServer(t, db, "--config", cfg, "--admin-addr", "127.0.0.1:0")
	ac, _, _ := sendBatch(t, s, "a", 1, 1, 0)
	waitLong(t, 20*time.Second, "the first rows done", func() bool { return destinationStats(t, db)[""].ByStatus["done"] == 2 })

	good := fanOutText(destTable("one", one.URL) + destTable("two", two.URL, `sources = ["gh"]`))
	writeConfig(t, dir, good)
	s.signal(syscall.SIGHUP)
	waitLog(t, s, "reloaded destinations: the rows routed from now on go by the new ones")
	bc, bf, bp := sendBatch(t, s, "b", 1, 1, 1)
	waitLong(t, 20*time.Second, "the rows after the reload done", func() bool { return destinationStats(t, db)[""].ByStatus["done"] == 5 })
	if got, want := one.rows(), sorted(ac, bc, bf, bp); !slices.Equal(got, want) {
		t.Errorf("one got %v, want %v", got, want)
	}
	if got, want := two.rows(), bp; !slices.Equal(got, want) {
		t.Errorf("two got %v, want %v", got, want)
	}

	writeConfig(t, dir, good+"[[source]]\nname = \"new\"\nscheme = \"sume\"\n[[source.secret]]\nvalue = \"x\"\n"+destTable("three", two.URL, `nats_url = "nats://127.0.0.1:4222"`))
	s.signal(syscall.SIGHUP)
	waitFor(t, "refused", func() bool { return strings.Contains(s.logs.String(), "reload refused") })
	client := &http.Client{Timeout: 5 * time.Second}
	if code := send(t, client, strings.TrimSuffix(s.url, "/webhooks/sume")+"/webhooks/new", jobBody("job_n"), "x"); code != 404 {
		t.Errorf("the refused file's new source: %d, want 404", code)
	}
	if got := names(liveDestinations(t, s.admin)); got != "one,two" {
		t.Errorf("after the refusal inbox destinations --admin: %s, want one,two", got)
	}
	s.signal(syscall.SIGTERM)
	<-s.done
}

// TestReloadNATSDestinations runs inbox dispatch with two NATS
// destinations, each with its inbox_nats_connected series, and reloads a
// file that moves one to another subject: its dispatcher is restarted on a
// new connection, the rows stored after the reload are published there,
// and both still show connected.
func TestReloadNATSDestinations(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	b.start()
	b.stream()
	// a has a stream of its own: a stream keeps one message per row id.
	alpha := b.streamOf("ALPHA", "alpha.>")
	nats := func(name, subject string) string {
		return fmt.Sprintf("[[destination]]\nname = %q\nnats_url = %q\nnats_subject = %q\n", name, b.url(), subject)
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "inbox.db")
	cfg := writeConfig(t, dir, fanOutText(nats("a", "alpha.one")+nats("b", "sume.jobs.b")))
	recv := startServer(t, db, "--config", fanOutConfig(t, ""))
	d := startInbox(t, []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}, "dispatch", "--db", db, "--config", cfg, "--admin-addr", "127.0.0.1:0")
	ac, _, _ := sendBatch(t, recv, "a", 1, 0, 0)
	waitLong(t, 20*time.Second, "the first row published twice", func() bool { return destinationStats(t, db)[""].ByStatus["done"] == 1 })

	writeConfig(t, dir, fanOutText(nats("a", "alpha.two")+nats("b", "sume.jobs.b")))
	d.signal(syscall.SIGHUP)
	waitLog(t, d, "reloaded destinations: the rows routed from now on go by the new ones")
	bc, _, _ := sendBatch(t, recv, "b", 1, 0, 0)
	waitLong(t, 20*time.Second, "the row after the reload published twice", func() bool { return destinationStats(t, db)[""].ByStatus["done"] == 2 })

	for subject, want := range map[string]string{"alpha.one": ac[0], "alpha.two": bc[0]} {
		msg, err := alpha.GetLastMsgForSubject(t.Context(), subject)
		if err != nil {
			t.Errorf("%s: %v", subject, err)
		} else if got := msg.Header.Get(natsgo.MsgIdHdr); got != want {
			t.Errorf("%s holds %s, want %s", subject, got, want)
		}
	}
	if got := b.messages(); len(got) != 2 {
		t.Errorf("b's stream holds %v, want both rows", got)
	}
	_, metrics := get(t, d.admin+"/metrics")
	for _, want := range []string{`inbox_nats_connected{destination="a"} 1`, `inbox_nats_connected{destination="b"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if _, body := get(t, d.admin+"/readyz"); !strings.Contains(body, "nats a: connected") || !strings.Contains(body, "destination a: dispatching") {
		t.Errorf("/readyz after the reload:\n%s", body)
	}
	if strings.Contains(d.logs.String(), `"level":"error"`) {
		t.Errorf("errors logged:\n%s", d.logs)
	}
}

// TestDispatchHangupWithoutConfig sends SIGHUP to inbox dispatch run with
// the flags alone: it logs that there is nothing to reload and goes on
// handing rows on, where it used to die of the signal.
func TestDispatchHangupWithoutConfig(t *testing.T) {
	t.Parallel()
	app := newDestApp(t, 204)
	dir := t.TempDir()
	db := filepath.Join(dir, "inbox.db")
	recv := startServer(t, db)
	d := startInbox(t, nil, "dispatch", "--db", db, "--forward-url", app.URL, "--admin-addr", "127.0.0.1:0")
	d.signal(syscall.SIGHUP)
	waitFor(t, "nothing to reload", func() bool { return strings.Contains(d.logs.String(), "nothing to reload") })
	if code := send(t, &http.Client{Timeout: 5 * time.Second}, recv.url, jobBody("job_1"), e2eSecret); code != 204 {
		t.Fatalf("send: %d", code)
	}
	waitLong(t, 20*time.Second, "job_1 handed on", func() bool { return len(app.rows()) == 1 })
	if got := names(liveDestinations(t, d.admin)); got != "default" {
		t.Errorf("inbox destinations --admin: %s, want default", got)
	}
}
