package admin

import (
	"encoding/base64"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"inbox/scheme"
)

// TestSecret checks that inbox secret prints a fresh whsec_ secret of 32
// random bytes, which forwarding takes as its key.
func TestSecret(t *testing.T) {
	t.Parallel()
	form := regexp.MustCompile(`^whsec_[A-Za-z0-9+/]{43}=\n$`)
	seen := map[string]bool{}
	for range 3 {
		out, err := runCommands(t, []*cli.Command{SecretCommand()}, "secret")
		if err != nil || !form.MatchString(out) {
			t.Fatalf("secret: %q, %v; want whsec_ and 44 characters of base64", out, err)
		}
		s := strings.TrimSpace(out)
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
		if err != nil || len(key) != 32 {
			t.Errorf("secret %q decodes to %d bytes, %v", s, len(key), err)
		}
		if k, err := scheme.StandardKey(s); err != nil || string(k) != string(key) {
			t.Errorf("StandardKey(inbox secret) = %v", err)
		}
		seen[s] = true
	}
	if len(seen) != 3 {
		t.Errorf("three runs printed %d distinct secrets", len(seen))
	}
	if _, err := runCommands(t, []*cli.Command{SecretCommand()}, "secret", "extra"); err == nil {
		t.Error("a stray argument was taken")
	}
}
