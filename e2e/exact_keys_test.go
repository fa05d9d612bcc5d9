package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExpectKeysExact posts to serve's POST /expect bodies whose keys
// encoding/json alone would take case-insensitively, the last one winning:
// a job_id repeated in another case, repeated as it is, or in another case
// alone. Each is refused with 400 and an error naming the key, and nothing
// is expected; the key as written still is.
func TestExpectKeysExact(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "inbox.db")
	srv := startServer(t, db, "--admin-addr", "127.0.0.1:0")
	post := func(body string) (int, string) {
		t.Helper()
		resp, err := http.Post(srv.admin+"/expect", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var answer struct{ Error string }
		json.NewDecoder(resp.Body).Decode(&answer)
		return resp.StatusCode, answer.Error
	}
	for _, tc := range []struct{ body, key string }{
		{`{"job_id":"job_a","JOB_ID":"job_b"}`, `"JOB_ID"`},
		{`{"job_id":"job_c","job_id":"job_d"}`, `"job_id" given twice`},
		{`{"Job_Id":"job_e"}`, `"Job_Id"`},
		{`{"job_ids":["job_f"],"Within":"1m"}`, `"Within"`},
	} {
		if code, msg := post(tc.body); code != http.StatusBadRequest || !strings.Contains(msg, tc.key) {
			t.Errorf("POST /expect %s: %d %q; want 400 naming %s", tc.body, code, msg, tc.key)
		}
	}
	if code, msg := post(`{"job_id":"job_g"}`); code != http.StatusOK {
		t.Fatalf("POST /expect job_g: %d %q", code, msg)
	}
	got := expectedState(t, db)
	if _, ok := got["job_g"]; !ok || len(got) != 1 {
		t.Errorf("expected = %+v; want job_g alone", got)
	}
}

// TestConfigKeysExact reads a --config whose source has its name twice,
// once in another case (the TOML decoder alone takes the last, NAME, for
// name), and one whose secret's key is cased otherwise: inbox sources
// refuses either, naming the key, as serve and dispatch do (one loader).
func TestConfigKeysExact(t *testing.T) {
	t.Parallel()
	db := fillDB(t, 0)
	for key, text := range map[string]string{
		"source.NAME":       "[[source]]\nname = \"a\"\nNAME = \"b\"\nscheme = \"github\"\n[[source.secret]]\nenv = \"GH_SECRET\"\n",
		"source.secret.Env": "[[source]]\nname = \"a\"\nscheme = \"github\"\n[[source.secret]]\nEnv = \"GH_SECRET\"\n",
	} {
		cfg := filepath.Join(t.TempDir(), "inbox.toml")
		if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		_, errOut, code := runCLI(t, []string{"GH_SECRET=gh-secret-0123456789"}, "sources", "--db", db, "--config", cfg)
		if code != 1 || !strings.Contains(errOut, "unknown key "+key) {
			t.Errorf("sources with %s: exit %d, %q; want exit 1 naming the key", key, code, errOut)
		}
	}
}
