package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadReplica reads [replica] beside the sources, refuses an unknown
// key and a duration that does not parse, and returns nil without one.
func TestReadReplica(t *testing.T) {
	t.Parallel()
	write := func(text string) string {
		p := filepath.Join(t.TempDir(), "inbox.toml")
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const source = "[[source]]\nname = \"sume\"\nscheme = \"sume\"\n[[source.secret]]\nenv = \"X\"\n"
	r, err := ReadReplica(write(source + "[replica]\nurl = \"file:///mnt/backup/inbox\"\nsync = true\nretention = \"48h\"\nsnapshot_interval = \"12h\"\nrestore_if_missing = true\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := FileReplica{URL: "file:///mnt/backup/inbox", Sync: true, Retention: "48h", SnapshotInterval: "12h", RestoreIfMissing: true}
	if r == nil || *r != want {
		t.Errorf("got %+v, want %+v", r, want)
	}
	if r, err := ReadReplica(write(source)); err != nil || r != nil {
		t.Errorf("without [replica]: got %+v, %v; want nil", r, err)
	}
	for text, want := range map[string]string{
		"[replica]\nurl = \"file:///x\"\nretention = \"three days\"\n": "retention",
		"[replica]\nurl = \"file:///x\"\nsnyc = true\n":                "unknown key",
		"[replica]\nURL = \"file:///x\"\n":                             "unknown key",
	} {
		if _, err := ReadReplica(write(source + text)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want an error naming %s", text, err, want)
		}
	}
}
