package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"inbox/inbox"
	"inbox/sume"
)

// TestGroupCommit runs group-commit as the bench does, as its own process,
// under load with one delivery in two a repeat: every answer 204, and
// every job acknowledged new stored once.
func TestGroupCommit(t *testing.T) {
	var out bytes.Buffer
	err := run(t.Context(), []string{"-order", "store-nothing,group-commit", "-conns", "4",
		"-warmup", "200ms", "-duration", "1s", "-repeat", "0.5"}, &out, io.Discard)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	checkStored(t, out.String(), "group-commit")
}

// TestGroupCommitAnswers: the reference answers 401 unsigned and 204 once
// committed (concurrent repeats too, stored once), as inbox does; 503 for
// a body it has no row for (inbox would park it) and when the database
// cannot take the commit, of which nothing is kept.
func TestGroupCommitAnswers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ref.db")
	db, err := openReferenceDB(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	g, err := startGroupWriter(t.Context(), db, path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.close()
	const secret = "whsec_test"
	srv := httptest.NewServer(&referenceHandler{secret: secret, commit: g.put})
	defer srv.Close()
	post := func(body string, signed bool) int { return postRef(t, srv.URL, secret, body, signed) }
	count := func() int {
		t.Helper()
		// Bounded: a transaction left open would hold the one connection.
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM deliveries`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	job := func(id string) string {
		return `{"event":"job.completed","job_id":"` + id + `","status":"COMPLETED"}`
	}
	var wg sync.WaitGroup
	codes := make([]int, 16)
	for i := range codes {
		wg.Go(func() { codes[i] = post(job("job_"+strconv.Itoa(i%4)), true) })
	}
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusNoContent {
			t.Errorf("delivery %d: %d, want 204", i, c)
		}
	}
	if n := count(); n != 4 {
		t.Errorf("%d rows for 4 jobs sent 16 times", n)
	}
	if c := post(job("job_9"), false); c != http.StatusUnauthorized {
		t.Errorf("unsigned: %d, want 401", c)
	}
	if c := post(`{"event":"job.completed"}`, true); c != http.StatusServiceUnavailable {
		t.Errorf("no job_id: %d, want 503", c)
	}
	// A batch one of whose writes fails fails as one: every write gets
	// the error, and nothing of it is kept.
	if _, err := db.ExecContext(t.Context(), `CREATE TRIGGER refuse BEFORE INSERT ON deliveries
		WHEN new.id = 'job_bad' BEGIN SELECT RAISE(ABORT, 'refused'); END`); err != nil {
		t.Fatal(err)
	}
	batch := []*inbox.Write[refRow]{{Op: refRow{id: "job_good", body: []byte("{}")}}, {Op: refRow{id: "job_bad", body: []byte("{}")}}}
	out, err := g.commit(batch)
	if err == nil || len(out) != len(batch) {
		t.Errorf("batch with a refused write: %d results, error %v; want one a write and the error", len(out), err)
	}
	if c := post(job("job_bad"), true); c != http.StatusServiceUnavailable {
		t.Errorf("a refused write through the loop: %d, want 503", c)
	}
	if n := count(); n != 4 {
		t.Errorf("%d rows after the refused batch, want the 4 before it", n)
	}
	if _, err := db.ExecContext(t.Context(), `ALTER TABLE deliveries RENAME TO gone`); err != nil {
		t.Fatal(err)
	}
	if c := post(job("job_10"), true); c != http.StatusServiceUnavailable {
		t.Errorf("with the table gone: %d, want 503", c)
	}
}

// postRef posts body to the reference at url, signed with secret when
// signed is set, and returns the status of the answer.
func postRef(t *testing.T, url, secret, body string, signed bool) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+refPath, strings.NewReader(body))
	if signed {
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		req.Header.Set(sume.HeaderTimestamp, ts)
		req.Header.Set(sume.HeaderSignature, sume.SignatureHeader(ts, []byte(body), secret))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// checkStored checks the run's row for receiver in the bench's output:
// deliveries made, no errors, and every job acknowledged new stored.
func checkStored(t *testing.T, out, receiver string) {
	t.Helper()
	row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(receiver) + ` +(\d+) .* (\d+) +(\d+) +(\d+) \((\d+) acked new\)$`).FindStringSubmatch(out)
	if row == nil {
		t.Fatalf("no %s row with rows stored in:\n%s", receiver, out)
	}
	rate, _ := strconv.Atoi(row[1])
	errs, rows, acked := row[2], row[4], row[5]
	if rate == 0 || errs != "0" || rows != acked || rows == "0" {
		t.Errorf("%s: %d deliveries/s, %s errors, %s rows for %s acked new; want deliveries, no errors, every acked job stored", receiver, rate, errs, rows, acked)
	}
}
