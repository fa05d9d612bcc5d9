package replicaclient_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"inbox/replicaclient"
)

func TestFileRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "replica")
	client, err := replicaclient.New(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := client.Type(); got != "file" {
		t.Fatalf("type %q, want file", got)
	}
	roundTrip(t, client)
	// What was written is Litestream's layout under the directory named.
	ltx, err := filepath.Glob(filepath.Join(dir, "ltx", "0", "*.ltx"))
	if err != nil || len(ltx) == 0 {
		entries, _ := os.ReadDir(dir)
		t.Fatalf("no level-0 LTX files under %s (%v): %v", dir, err, entries)
	}
}

func TestFileLocalhost(t *testing.T) {
	dir := t.TempDir()
	if _, err := replicaclient.New(context.Background(), "file://localhost"+dir); err != nil {
		t.Fatalf("file://localhost/abs: %v", err)
	}
}

func TestNewRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, url string
		says      []string // what the error tells the operator to write
	}{
		{"empty", "", []string{"file://", "s3://"}},
		{"bare path", "/var/backups/inbox", []string{"file:///var/backups/inbox"}},
		{"bare word", "backups", []string{"no scheme", "file://"}},
		{"unknown scheme", "gs://bucket/inbox", []string{`"gs"`, "s3://"}},
		{"file relative host", "file://backups/inbox", []string{"three slashes", "file:///"}},
		{"file opaque", "file:backups/inbox", []string{"relative path", "file:///"}},
		{"file root", "file:///", []string{"no directory", "file:///"}},
		{"file empty", "file://", []string{"no directory"}},
		{"file query", "file:///tmp/x?sync=1", []string{"no query", "sync"}},
		{"file user", "file://me:pw@/tmp/x", []string{"no user"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := replicaclient.New(context.Background(), tc.url)
			if err == nil {
				t.Fatalf("New(%q) succeeded, want an error", tc.url)
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if strings.Contains(err.Error(), ":pw@") {
				t.Errorf("error %q holds the password", err)
			}
		})
	}
}
