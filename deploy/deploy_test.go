package deploy_test

import (
	"crypto/rand"
	"encoding/base64"
	"testing"

	"inbox/deploy"
)

// TestPlaceholder checks the shipped files' placeholders and their kin are
// refused, and that real secrets of every form are not.
func TestPlaceholder(t *testing.T) {
	for _, s := range []string{
		"replace-with-your-signing-secret",
		" replace-with-your-signing-secret ",
		"vjs_replace-with-your-vibe-secret",
		"vjs_the-old-one-during-a-rotation",
		"replace-with-your-github-secret",
		"whsec_replace-with-a-base64-key",
		"REPLACE-WITH-anything",
	} {
		if !deploy.Placeholder(s) {
			t.Errorf("Placeholder(%q) = false, want true", s)
		}
	}
	key := make([]byte, 32)
	rand.Read(key)
	for _, s := range []string{
		"", "whsec_" + base64.StdEncoding.EncodeToString(key), "vjs_" + base64.RawURLEncoding.EncodeToString(key),
		"e2e-secret-value", "whsec_c2VjcmV0LWtleQ==",
	} {
		if deploy.Placeholder(s) {
			t.Errorf("Placeholder(%q) = true, want false", s)
		}
	}
}
