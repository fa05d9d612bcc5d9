package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"inbox/scheme"
)

// oneLine fails the test unless a command exited non-zero with nothing on
// stdout and one line on stderr holding want.
func oneLine(t *testing.T, what, out, errOut string, code int, want string) {
	t.Helper()
	if code == 0 || out != "" || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, want) {
		t.Errorf("%s: exit %d, stdout %q, stderr %q; want a one-line refusal holding %q", what, code, out, errOut, want)
	}
}

// TestHardLinkedDatabase gives the live database a second name, a hard
// link in another folder, while serve runs: a backup through that name
// onto the live -wal, a backup of it, a read through it and a second serve
// on it are each refused with one line (SQLite would look for the -wal
// under the name opened, and read stale rows or corrupt the file); serve
// goes on storing, its -wal untouched; once the link is gone, backup works.
func TestHardLinkedDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data, other := filepath.Join(dir, "d"), filepath.Join(dir, "o")
	must(t, os.Mkdir(data, 0o700))
	must(t, os.Mkdir(other, 0o700))
	db := filepath.Join(data, "inbox.db")
	srv := startServer(t, db)
	if got := send(t, http.DefaultClient, srv.url, job("job_1"), e2eSecret); got != http.StatusNoContent {
		t.Fatalf("delivery: %d", got)
	}
	hl := filepath.Join(other, "hl")
	must(t, os.Link(db, hl))
	wal := readFile(t, db+"-wal")
	walInfo, err := os.Stat(db + "-wal")
	must(t, err)

	for _, args := range [][]string{
		{"backup", "--db", hl, "--force", db + "-wal"},
		{"backup", "--db", hl, "--force", filepath.Join(other, "copy.db")},
		{"backup", "--db", db, "--force", db + "-wal"},
		{"backup", "--db", db, filepath.Join(other, "copy.db")},
		{"list", "--db", hl},
		{"purge", "--db", hl, "--older-than", "30d"},
	} {
		out, errOut, code := runCLI(t, nil, args...)
		oneLine(t, strings.Join(args, " "), out, errOut, code, "hard links")
	}
	if _, err := os.Stat(filepath.Join(other, "copy.db")); err == nil {
		t.Error("a backup was written through the hard-linked database")
	}
	fi, err := os.Stat(db + "-wal")
	must(t, err)
	if !os.SameFile(fi, walInfo) {
		t.Errorf("the live -wal was replaced")
	}
	_, errOut, code := runServeBriefly(t, nil, hl)
	oneLine(t, "serve --db "+hl, "", errOut, code, "hard links")

	if got := send(t, http.DefaultClient, srv.url, job("job_2"), e2eSecret); got != http.StatusNoContent {
		t.Errorf("delivery after the refusals: %d\n%s", got, srv.logs)
	}
	if len(readFile(t, db+"-wal")) < len(wal) {
		t.Errorf("the live -wal shrank")
	}
	must(t, os.Remove(hl))
	copyPath := filepath.Join(other, "copy.db")
	if out, errOut, code := runCLI(t, nil, "backup", "--db", db, copyPath); code != 0 || !strings.HasPrefix(out, "copied 2 rows") {
		t.Errorf("backup once the link is gone: exit %d, stdout %q, stderr %q; want both rows copied", code, out, errOut)
	}
}

// TestSourcesPlaceholderWithoutConfig: without --config, inbox sources
// calls the Sume secret of the shipped inbox.env invalid, as serve refuses
// it, alone or in a rotation list.
func TestSourcesPlaceholderWithoutConfig(t *testing.T) {
	t.Parallel()
	db := fillDB(t, 1)
	for _, tt := range []struct {
		secret string
		states []string
	}{
		{"replace-with-your-signing-secret", []string{"invalid"}},
		{"real-secret-value,replace-with-your-signing-secret", []string{"live", "invalid"}},
		{" Replace-With-Your-Signing-Secret ", []string{"invalid"}},
	} {
		out, errOut, code := runCLI(t, []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + tt.secret}, "sources", "--db", db, "--json")
		if code != 0 {
			t.Fatalf("sources: exit %d: %s", code, errOut)
		}
		var states []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var r struct{ State, Fingerprint string }
			must(t, json.Unmarshal([]byte(line), &r))
			states = append(states, r.State)
			if r.State == "invalid" && r.Fingerprint != "" {
				t.Errorf("%q: an invalid secret with a fingerprint", tt.secret)
			}
		}
		if fmt.Sprint(states) != fmt.Sprint(tt.states) {
			t.Errorf("sources with %q: states %v, want %v", tt.secret, states, tt.states)
		}
	}
}

// TestExecWithholdsEncodedSecrets runs dispatch --exec with sources of
// several schemes: no variable holding a configured secret in another
// encoding reaches the command (a whsec_ secret's body alone, its key in
// base64url, the Sume secret percent-encoded in a URL's password, a GitHub
// secret in base64 or hex, an expired whsec_ key), while the rest does.
func TestExecWithholdsEncodedSecrets(t *testing.T) {
	key := []byte("standard-webhooks-raw-key-bytes!")
	k := base64.StdEncoding.EncodeToString(key)
	expiredKey := []byte("an-expired-standard-key-32-bytes")
	expired := "whsec_" + base64.StdEncoding.EncodeToString(expiredKey)
	const ghSecret = "gh-value-secret-7c1d"
	const sume = "newsumesecret"
	dir := t.TempDir()
	cfg := filepath.Join(dir, "inbox.toml")
	must(t, os.WriteFile(cfg, []byte(`
[[source]]
name = "sume"
scheme = "sume"
[[source.secret]]
env = "SUME_COM_WEBHOOK_SIGNING_SECRET"

[[source]]
name = "hooks"
scheme = "standard-webhooks"
[[source.secret]]
env = "SW_SECRET"
[[source.secret]]
value = "`+expired+`"
expires = 2020-01-01T00:00:00Z

[[source]]
name = "gh"
scheme = "github"
[[source.secret]]
value = "`+ghSecret+`"
`), 0o600))
	leaks := map[string]string{
		"APP_KEY_ALONE":      k,
		"APP_KEY_URL":        base64.RawURLEncoding.EncodeToString(key),
		"APP_KEY_HEX":        hex.EncodeToString(key),
		"APP_SUME_URL":       "https://u:newsume%73ecret@x.internal/",
		"APP_SUME_TWICE":     "https://u:newsume%2573ecret@x.internal/",
		"APP_GH_B64":         base64.StdEncoding.EncodeToString([]byte(ghSecret)),
		"APP_GH_HEX":         strings.ToUpper(hex.EncodeToString([]byte(ghSecret))),
		"APP_EXPIRED_B64":    base64.StdEncoding.EncodeToString(expiredKey),
		"APP_EXPIRED_RAWURL": base64.RawURLEncoding.EncodeToString(expiredKey),
		"APP_EXPIRED_BODY":   strings.TrimPrefix(expired, "whsec_"),
	}
	t.Setenv("SW_SECRET", "whsec_"+k)
	t.Setenv("SUME_COM_WEBHOOK_SIGNING_SECRET", sume)
	t.Setenv("APP_MODE", "production")
	t.Setenv("APP_PERCENT", "100%-sure %zz")
	for name, v := range leaks {
		t.Setenv(name, v)
	}
	db, out := fillDB(t, 1), t.TempDir()
	d := startDispatch(t, "--db", db, "--config", cfg, "--exec", `env > "`+out+`/$INBOX_KEY.env"`)
	var env string
	waitFor(t, "the command", func() bool {
		b, err := os.ReadFile(filepath.Join(out, "job_0000.env"))
		env = string(b)
		return err == nil && strings.Contains(env, "INBOX_ATTEMPT=")
	})
	for name := range leaks {
		if strings.Contains(env, name+"=") {
			t.Errorf("the command saw %s", name)
		}
	}
	for _, s := range []string{k, sume, ghSecret, string(key), string(expiredKey)} {
		if strings.Contains(env, s) {
			t.Errorf("the command's environment holds a configured secret (%d bytes)", len(s))
		}
	}
	for _, kv := range []string{"APP_MODE=production\n", "APP_PERCENT=100%-sure %zz\n"} {
		if !strings.Contains(env, kv) {
			t.Errorf("the command lacks %q", kv)
		}
	}
	if strings.Contains(d.logs.String(), ghSecret) {
		t.Error("the log holds a secret")
	}
}

// TestOverwrittenUnderServe writes over the live database in place while
// serve runs, as `cp backup.db inbox.db` or `: > inbox.db` do (the same
// inode): within a second /readyz fails and deliveries get 503 with
// Retry-After, logged once at error level; while commands of the
// operator's, run beside serve as usual, never make it think so.
func TestOverwrittenUnderServe(t *testing.T) {
	for _, tt := range []struct {
		name      string
		overwrite func(t *testing.T, db string)
	}{
		{"backup copied over", func(t *testing.T, db string) {
			copyPath := filepath.Join(t.TempDir(), "backup.db")
			if _, errOut, code := runCLI(t, nil, "backup", "--db", db, copyPath); code != 0 {
				t.Fatalf("backup: %s", errOut)
			}
			must(t, os.WriteFile(db, readFile(t, copyPath), 0o600))
		}},
		{"emptied", func(t *testing.T, db string) {
			must(t, os.Truncate(db, 0))
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "inbox.db")
			srv := startServer(t, db, "--busy-timeout", "500ms")
			for i := range 30 {
				if got := send(t, http.DefaultClient, srv.url, job(fmt.Sprintf("job_%d", i)), e2eSecret); got != http.StatusNoContent {
					t.Fatalf("delivery %d: %d", i, got)
				}
			}
			// The operator's commands write and checkpoint beside serve:
			// no overwrite.
			for _, args := range [][]string{{"purge", "--db", db, "--older-than", "30d"}, {"stats", "--db", db}} {
				if _, errOut, code := runCLI(t, nil, args...); code != 0 {
					t.Fatalf("%v: %s", args, errOut)
				}
			}
			time.Sleep(300 * time.Millisecond)
			if code, _ := get(t, srv.admin+"/readyz"); code != http.StatusOK {
				t.Fatalf("/readyz before the overwrite: %d\n%s", code, srv.logs)
			}
			at := time.Now()
			tt.overwrite(t, db)
			waitFor(t, "/readyz to fail", func() bool { code, _ := get(t, srv.admin+"/readyz"); return code == 503 })
			noticed := time.Since(at)
			t.Logf("/readyz failed %v after the overwrite", noticed.Round(time.Millisecond))
			if noticed > time.Second {
				t.Errorf("/readyz failed %v after the overwrite, want within 1s", noticed)
			}
			client := &http.Client{Timeout: 5 * time.Second}
			for i := range 5 {
				status, retry := post(t.Context(), client, srv.url, job(fmt.Sprintf("job_after_%d", i)))
				if status != http.StatusServiceUnavailable || retry == "" {
					t.Errorf("delivery after the overwrite: %d, Retry-After %q; want 503 with it", status, retry)
				}
			}
			if n := countLogs(t, srv.logs.String(), "error", "database file lost"); n != 1 {
				t.Errorf("logged %d times at error level, want once:\n%s", n, srv.logs)
			}
			if !strings.Contains(srv.logs.String(), "overwritten in place") {
				t.Errorf("the log does not say the file was overwritten:\n%s", srv.logs)
			}
			srv.signal(syscall.SIGTERM)
			<-srv.done
		})
	}
}

// TestBusyTimeoutRefused gives every command that takes --busy-timeout a
// value it cannot honour, on the command line or through
// INBOX_BUSY_TIMEOUT: each refuses with one line naming the flag.
func TestBusyTimeoutRefused(t *testing.T) {
	t.Parallel()
	db := fillDB(t, 1)
	for _, cmd := range [][]string{
		{"dispatch", "--db", db, "--exec", "true"},
		{"purge", "--db", db, "--older-than", "30d"},
		{"reprocess", "--db", db, "--all"},
		{"expect", "--db", db, "job_1"},
	} {
		for _, bad := range []string{"-1s", "0", "0s", "500us"} {
			out, errOut, code := runBriefly(t, nil, append(append([]string{}, cmd[0], "--busy-timeout", bad), cmd[1:]...)...)
			oneLine(t, cmd[0]+" --busy-timeout "+bad, out, errOut, code, "--busy-timeout")
		}
		out, errOut, code := runBriefly(t, []string{"INBOX_BUSY_TIMEOUT=-1s"}, cmd...)
		oneLine(t, cmd[0]+" with INBOX_BUSY_TIMEOUT=-1s", out, errOut, code, "--busy-timeout")
	}
}

// runBriefly is runCLI for a command that may run on (dispatch taking a
// bad value): killed after 5s, it reports exit code -1.
func runBriefly(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	bin := binary(t) // built before the 5 s start
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		return stdout.String(), stderr.String(), -1
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

// ghSource serves a GitHub source named shop and returns a function that
// posts a body to it signed as GitHub does, with the event header given
// as raw bytes.
func ghSource(t *testing.T, db string) func(body, delivery, event string) int {
	t.Helper()
	_, post := ghSourceBeside(t, db, "")
	return post
}

// ghSourceBeside is ghSource with the sources file's other sources
// (TOML) before shop, and the server too.
func ghSourceBeside(t *testing.T, db, sources string) (*server, func(body, delivery, event string) int) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "inbox.toml")
	const secret = "shop-github-secret"
	must(t, os.WriteFile(cfg, []byte(sources+`
[[source]]
name = "shop"
scheme = "github"
events = ["push"]
[[source.secret]]
value = "`+secret+`"
`), 0o600))
	srv := startServer(t, db, "--config", cfg)
	url := strings.TrimSuffix(srv.url, "/webhooks/sume") + "/webhooks/shop"
	return srv, func(body, delivery, event string) int {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		must(t, err)
		req.Header[scheme.HeaderGitHubSignature] = []string{scheme.SignGitHub(secret, []byte(body))}
		if delivery != "" {
			req.Header[scheme.HeaderGitHubDelivery] = []string{delivery}
		}
		req.Header[scheme.HeaderGitHubEvent] = []string{event}
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
}

// TestTablesKeepIDsWhole: another source's sha256: ids (76 characters and
// more) are printed whole by list --wide and parked --wide, and show finds
// the row by what they print (without --wide a table shortens them to fit
// 120 columns: TestListFitsWidth).
func TestTablesKeepIDsWhole(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inbox.db")
	post := ghSource(t, db)
	if got := post("not json at all", "", "push"); got != http.StatusOK {
		t.Fatalf("delivery: %d", got)
	}
	for _, cmd := range []string{"list", "parked"} {
		out, errOut, code := runCLI(t, nil, cmd, "--db", db, "--wide")
		if code != 0 {
			t.Fatalf("%s: %s", cmd, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 {
			t.Fatalf("%s:\n%s", cmd, out)
		}
		id := strings.Fields(lines[1])[0]
		if !strings.HasPrefix(id, "shop/sha256:") || len(id) != len("shop/sha256:")+64 || strings.Contains(id, "…") {
			t.Errorf("%s prints the id %q, want shop/sha256: and 64 hex", cmd, id)
		}
		if _, errOut, code := runCLI(t, nil, "show", "--db", db, id); code != 0 {
			t.Errorf("show %s (as %s prints it): exit %d: %s", id, cmd, code, errOut)
		}
	}
}

// TestJSONExactForInvalidUTF8 stores a verified GitHub delivery whose
// event header is not UTF-8: list, parked and show --json give the field
// as encoding/json can and, beside it, event_base64 with its exact bytes.
func TestJSONExactForInvalidUTF8(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inbox.db")
	post := ghSource(t, db)
	const event = "push\xe2\x80\xae\xff\xfe"
	if got := post(`{"ref":"main"}`, "d-1", event); got != http.StatusOK {
		t.Fatalf("delivery: %d", got)
	}
	if got := post(`{"ref":"main"}`, "d-2", "push"); got != http.StatusOK {
		t.Fatalf("delivery: %d", got)
	}
	rows := map[string]map[string]any{}
	for _, args := range [][]string{{"list", "--db", db, "--json"}, {"parked", "--db", db, "--json"}, {"show", "--db", db, "--json", "shop/d-1"}} {
		out, errOut, code := runCLI(t, nil, args...)
		if code != 0 {
			t.Fatalf("%v: %s", args, errOut)
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var r map[string]any
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("%v: %v: %q", args, err, line)
			}
			rows[args[0]+" "+r["id"].(string)] = r
		}
	}
	for _, name := range []string{"list shop/d-1", "parked shop/d-1", "show shop/d-1"} {
		r, ok := rows[name]
		if !ok {
			t.Errorf("%s: no such row in %v", name, rows)
			continue
		}
		b, err := base64.StdEncoding.DecodeString(fmt.Sprint(r["event_base64"]))
		if err != nil || string(b) != event {
			t.Errorf("%s: event_base64 %v decodes to %q, want the header's bytes %q", name, r["event_base64"], b, event)
		}
	}
	if r, ok := rows["list shop/d-2"]; !ok || r["event"] != "push" || r["event_base64"] != nil {
		t.Errorf("a UTF-8 event: %v, want event push and no event_base64", r)
	}
}

// TestStripeHeadersItsLibraryAccepts posts to a Stripe source headers
// that stripe-node's generateTestHeaderString can make and its verifyHeader
// accepts (unknown names in any case, entries without "=", empty ones, a
// malformed v1 beside the good one): each is accepted; without a good v1
// or without t, refused.
func TestStripeHeadersItsLibraryAccepts(t *testing.T) {
	t.Parallel()
	const secret = "whsec_stripe-test-secret"
	cfg := filepath.Join(t.TempDir(), "inbox.toml")
	must(t, os.WriteFile(cfg, []byte(`
[[source]]
name = "pay"
scheme = "stripe"
events = ["invoice.paid"]
[[source.secret]]
value = "`+secret+`"
`), 0o600))
	srv := startServer(t, filepath.Join(t.TempDir(), "inbox.db"), "--config", cfg)
	url := strings.TrimSuffix(srv.url, "/webhooks/sume") + "/webhooks/pay"
	for i, tt := range []struct {
		header func(t, good string) string
		want   int
	}{
		{func(t, g string) string { return "t=" + t + "," + g }, 200},
		{func(t, g string) string { return "t=" + t + ",V1=abc," + g }, 200},
		{func(t, g string) string { return "t=" + t + ",foo," + g }, 200},
		{func(t, g string) string { return "t=" + t + ",," + g }, 200},
		{func(t, g string) string { return "t=" + t + ",v1=abcd," + g }, 200},
		{func(t, g string) string { return g + ",t=" + t + ",v0=" + strings.Repeat("0", 64) }, 200},
		{func(t, g string) string { return "t=" + t + ",v1=abcd" }, 401},
		{func(t, g string) string { return "t=" + t + ",V1=" + strings.TrimPrefix(g, "v1=") }, 401},
		{func(t, g string) string { return "foo," + g }, 401},
	} {
		body := fmt.Sprintf(`{"id":"evt_%d","object":"event","type":"invoice.paid"}`, i)
		ts := time.Now().Unix()
		signed := scheme.SignStripe(ts, []byte(body), secret) // t=...,v1=...
		good := signed[strings.Index(signed, ",")+1:]
		h := tt.header(strconv.FormatInt(ts, 10), good)
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		must(t, err)
		req.Header.Set(scheme.HeaderStripeSignature, h)
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("Stripe-Signature %s: %d, want %d", strings.ReplaceAll(h, strings.TrimPrefix(good, "v1="), "<good>"), resp.StatusCode, tt.want)
		}
	}
}

// TestPerHourWholeHours: parked --per-hour takes whole hours, as alert
// --parked-every-hour does; 90m is refused by both, with one line.
func TestPerHourWholeHours(t *testing.T) {
	t.Parallel()
	db := fillDB(t, 1)
	for _, args := range [][]string{
		{"parked", "--db", db, "--per-hour", "--since", "90m"},
		{"parked", "--db", db, "--per-hour", "--since", "30m"},
		{"parked", "--db", db, "--per-hour", "--since", "0s"},
		{"alert", "--db", db, "--parked-every-hour", "90m"},
	} {
		out, errOut, code := runCLI(t, nil, args...)
		oneLine(t, strings.Join(args[3:], " "), out, errOut, code, "whole hours")
	}
	out, errOut, code := runCLI(t, nil, "parked", "--db", db, "--per-hour", "--since", "2h", "--json")
	if n := strings.Count(out, "\n"); code != 0 || n != 2 {
		t.Errorf("parked --per-hour --since 2h: exit %d, %d lines, stderr %q; want 2 hours", code, n, errOut)
	}
}
