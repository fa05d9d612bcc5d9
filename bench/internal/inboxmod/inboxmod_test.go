package inboxmod

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestDir finds, from the bench module, the folder above it: the inbox
// module the replace directive names, whose schema.sql Schema reads.
func TestDir(t *testing.T) {
	dir, err := Dir(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if dir != want {
		t.Errorf("Dir = %s, want %s", dir, want)
	}
	schema, err := Schema(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	onDisk, err := os.ReadFile(filepath.Join(want, "schema.sql"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(schema, onDisk) || !bytes.Contains(schema, []byte("CREATE TABLE")) {
		t.Errorf("Schema is not %s/schema.sql", want)
	}
}
