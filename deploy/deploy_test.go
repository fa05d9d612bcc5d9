package deploy_test

import (
	"crypto/rand"
	"encoding/base64"
	"testing"

	"inbox/config"
	"inbox/deploy"
	"inbox/inbox"
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

// TestTOMLSumeAlone checks that the shipped inbox.toml serves the Sume
// source alone, as serve does without it: the cron lines that read it
// (inbox alert --quiet-for and --failing-for --config) must not watch a
// source a Sume-only install never set up.
func TestTOMLSumeAlone(t *testing.T) {
	sources, err := config.DescribeSources("inbox.toml", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range sources {
		names = append(names, s.Name)
	}
	if len(names) != 1 || names[0] != inbox.DefaultSource {
		t.Errorf("inbox.toml serves %v, want %s alone", names, inbox.DefaultSource)
	}
}
