package admin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// loadConfig writes text as a configuration file and loads it, with env as
// the environment.
func loadConfig(t *testing.T, text string, env map[string]string) ([]Source, error) {
	t.Helper()
	return LoadSources(writeTestFile(t, text), func(k string) string { return env[k] })
}

// writeTestFile writes text as a configuration file and returns its path.
func writeTestFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "inbox.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestStandardWebhooksSecretForm checks that a standard-webhooks source
// takes only the specification's whsec_<base64> secrets, and that the
// refusal does not show the secret.
func TestStandardWebhooksSecretForm(t *testing.T) {
	const conf = `
[[source]]
name = "sw"
scheme = "standard-webhooks"
[[source.secret]]
env = "SW_SECRET"
`
	for secret, ok := range map[string]bool{
		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw": true,
		"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw":       false, // raw: refused, not used as bytes
		"whsec_not base64!":                      false,
	} {
		srcs, err := loadConfig(t, conf, map[string]string{"SW_SECRET": secret})
		if ok && (err != nil || len(srcs) != 1 || len(srcs[0].Keys) != 1) {
			t.Errorf("%s: %v", secret, err)
		}
		if !ok && err == nil {
			t.Errorf("%s: accepted", secret)
		}
		if err != nil && strings.Contains(err.Error(), strings.TrimPrefix(secret, "whsec_")) {
			t.Errorf("%s: error shows the secret: %v", secret, err)
		}
	}
}

// TestPlaceholderSecretRefused checks that a secret holding a placeholder
// of the shipped files is refused naming where it came from, and shown as
// invalid by inbox sources, whatever the scheme.
func TestPlaceholderSecretRefused(t *testing.T) {
	const conf = `
[[source]]
name = "gh"
scheme = "github"
[[source.secret]]
env = "GH_SECRET"
`
	const placeholder = "replace-with-your-github-secret"
	_, err := loadConfig(t, conf, map[string]string{"GH_SECRET": placeholder})
	if err == nil || !strings.Contains(err.Error(), "GH_SECRET") || !strings.Contains(err.Error(), "placeholder") || strings.Contains(err.Error(), placeholder) {
		t.Errorf("env placeholder: %v", err)
	}
	_, err = loadConfig(t, strings.Replace(conf, `env = "GH_SECRET"`, `value = "`+placeholder+`"`, 1), nil)
	if err == nil || !strings.Contains(err.Error(), "placeholder") {
		t.Errorf("value placeholder: %v", err)
	}
	srcs, err := DescribeSources(writeTestFile(t, conf), func(string) string { return placeholder })
	if err != nil || len(srcs) != 1 || !srcs[0].Secrets[0].Invalid || srcs[0].Secrets[0].Key != nil {
		t.Errorf("DescribeSources: %+v, %v; want the secret invalid", srcs, err)
	}
}
