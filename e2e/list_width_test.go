package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"inbox/scheme"
)

// TestListFitsWidth stores rows with the longest ids and fields a table
// shows: sha256: keys of the Sume source and of a source with a name of
// the longest allowed, a 150-character delivery id, long event names. list
// and parked print them within 120 columns, each long id shortened in the
// middle with an ellipsis, its start and end kept; --wide prints every id
// whole, as --json has it; and a shortened id given to show, replay,
// reprocess, expect or dismiss is refused, saying how to get it whole.
func TestListFitsWidth(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "inbox.db")
	cfg := filepath.Join(dir, "inbox.toml")
	const long = "webhooks-from-the-billing-system" // 32: the longest name
	const ghSecret = "gh-secret"
	err := os.WriteFile(cfg, []byte(`
[[source]]
name = "sume"
scheme = "sume"
[[source.secret]]
env = "SUME_COM_WEBHOOK_SIGNING_SECRET"

[[source]]
name = "`+long+`"
scheme = "github"
events = ["push"]
[[source.secret]]
value = "`+ghSecret+`"
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, db, "--config", cfg)
	client := &http.Client{Timeout: 5 * time.Second}
	longEvent := "job.completed.with.a.rather.long.event.name.that.goes.on.and.on"
	for _, body := range []string{
		`{"event":"job.completed","status":"COMPLETED"}`,          // no job_id: a sha256: key
		`{"event":"` + longEvent + `","job_id":"job_long_event"}`, // unknown_event
	} {
		if code := send(t, client, s.url, body, e2eSecret); code != http.StatusNoContent {
			t.Fatalf("sume %s: %d", body, code)
		}
	}
	base := strings.TrimSuffix(s.url, "/webhooks/sume")
	gh := func(delivery, event string) {
		t.Helper()
		body := `{"ref":"main","delivery":"` + delivery + event + `"}`
		h := http.Header{}
		h.Set(scheme.HeaderGitHubSignature, scheme.SignGitHub(ghSecret, []byte(body)))
		if delivery != "" {
			h.Set(scheme.HeaderGitHubDelivery, delivery)
		}
		h.Set(scheme.HeaderGitHubEvent, event)
		if code, answer := postWith(t, client, base+"/webhooks/"+long, body, h); code != http.StatusOK {
			t.Fatalf("github %q %q: %d %s", delivery, event, code, answer)
		}
	}
	gh("", "push") // no delivery id: a sha256: key
	gh(strings.Repeat("d", 150), "pull_request_review_comment.edited.by.someone.somewhere")
	gh("short", "push")

	out, errOut, code := runCLI(t, nil, "list", "--db", db, "--json")
	if code != 0 {
		t.Fatalf("list --json: exit %d: %s", code, errOut)
	}
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var row struct{ ID string }
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, row.ID)
	}
	if len(ids) != 5 {
		t.Fatalf("list --json: %d rows, want 5:\n%s", len(ids), out)
	}
	var longest int
	for _, id := range ids {
		longest = max(longest, len(id))
	}
	if longest < 100 {
		t.Fatalf("the longest id is %d characters: the rows are not as long as meant", longest)
	}

	for _, args := range [][]string{{"list"}, {"parked"}, {"list", "--status", "parked"}} {
		out, errOut, code := runCLI(t, nil, append(args, "--db", db)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
		for _, line := range lines {
			if n := utf8.RuneCountInString(line); n > 120 {
				t.Errorf("%v: a line of %d characters, want at most 120:\n%s", args, n, out)
				break
			}
		}
		// Each id, whole or shortened: its start, and with an ellipsis its
		// last four characters.
		for _, id := range ids {
			found := false
			for _, line := range lines[1:] {
				shown, _, _ := strings.Cut(line, " ")
				if shown == id {
					found = true
				} else if head, tail, ok := strings.Cut(shown, "…"); ok && len(head) >= 10 && strings.HasPrefix(id, head) && strings.HasSuffix(id, tail) && len(tail) == 4 {
					found = true
				}
			}
			if !found && (len(args) == 1 && args[0] == "list" || !strings.HasSuffix(id, "/short")) {
				t.Errorf("%v: no line shows %s, whole or as its start…its end:\n%s", args, id, out)
			}
		}
		if args[0] == "list" && !strings.Contains(out, "…") {
			t.Errorf("%v: no id shortened:\n%s", args, out)
		}
	}

	out, _, code = runCLI(t, nil, "list", "--db", db, "--wide")
	for _, id := range ids {
		if code != 0 || !strings.Contains(out, id+" ") {
			t.Errorf("list --wide: exit %d, does not show %s whole:\n%s", code, id, out)
		}
	}
	if !strings.Contains(out, longEvent) {
		t.Errorf("list --wide: the event %s is not whole:\n%s", longEvent, out)
	}

	// A shortened id is no id: refused, never looked for or recorded.
	out, _, _ = runCLI(t, nil, "list", "--db", db)
	var short string
	for _, line := range strings.Split(out, "\n") {
		if id, _, _ := strings.Cut(line, " "); strings.Contains(id, "…") {
			short = id
			break
		}
	}
	for _, args := range [][]string{
		{"show", "--db", db, short},
		{"replay", "--db", db, "--dry-run", short},
		{"reprocess", "--db", db, "--dry-run", short},
		{"expect", "--db", db, short},
		{"dismiss", "--db", db, "--note", "read", short},
		{"dismiss", "--db", db, "--note", "read", "--dry-run", short},
	} {
		out, errOut, code := runCLI(t, nil, args...)
		if code == 0 || out != "" || !strings.Contains(errOut, "shortened") || !strings.Contains(errOut, "--wide") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want the shortened id refused", args, code, out, errOut)
		}
	}
}
