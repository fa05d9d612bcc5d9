package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"inbox/scheme"
)

// loadConfig writes text as a configuration file and loads it, with env as
// the environment.
func loadConfig(t *testing.T, text string, env map[string]string) ([]Source, error) {
	t.Helper()
	return LoadSources(writeTestFile(t, text), func(k string) string { return env[k] })
}

// liveVibeSecret is a secret in Vibe's form: vjs_ and the unpadded
// base64url of 32 bytes.
const liveVibeSecret = "vjs_bGl2ZS1saXZlLWxpdmUtbGl2ZS1saXZlLWxpdmUtbGk"

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

// TestVibeSecretForm checks that a vibe source takes only secrets of Vibe's
// form (vjs_ and 43 base64url characters), and that the refusal names the
// variable to fix without showing the secret.
func TestVibeSecretForm(t *testing.T) {
	const conf = `
[[source]]
name = "vibe"
scheme = "vibe"
[[source.secret]]
env = "VIBE_JOB_SIGNING_SECRET"
`
	for secret, ok := range map[string]bool{
		liveVibeSecret:                             true,
		"vjs_replace-with-your-vibe-secret":        false, // the shipped placeholder
		liveVibeSecret[:46]:                        false,
		liveVibeSecret + "x":                       false,
		strings.TrimPrefix(liveVibeSecret, "vjs_"): false,
	} {
		srcs, err := loadConfig(t, conf, map[string]string{"VIBE_JOB_SIGNING_SECRET": secret})
		if ok && (err != nil || len(srcs[0].Keys) != 1 || string(srcs[0].Keys[0].Key) != secret) {
			t.Errorf("%s: %v; want the whole secret as the key", secret, err)
		}
		if ok {
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "VIBE_JOB_SIGNING_SECRET") ||
			!strings.Contains(err.Error(), "vjs_") && !strings.Contains(err.Error(), "placeholder") {
			t.Errorf("%s: err = %v; want a refusal naming VIBE_JOB_SIGNING_SECRET and the form or the placeholder", secret, err)
		} else if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: error shows the secret: %v", secret, err)
		}
	}
	// A secret written in the file is named by its place instead.
	_, err := loadConfig(t, "[[source]]\nname = \"vibe\"\nscheme = \"vibe\"\n[[source.secret]]\nvalue = \"vjs_short\"\n", nil)
	if err == nil || !strings.Contains(err.Error(), "secret 1 (value in the file)") || strings.Contains(err.Error(), "vjs_short") {
		t.Errorf("value in the file: err = %v", err)
	}
	// inbox sources shows it as invalid rather than failing.
	srcs, err := DescribeSources(writeTestFile(t, conf), func(string) string { return "vjs_short" })
	if err != nil || !srcs[0].Secrets[0].Invalid {
		t.Errorf("DescribeSources: %+v, %v; want the secret invalid", srcs, err)
	}
}

// TestVibeJobIDs checks the vibe source's job_ids: the expected jobIds
// reach the scheme, an empty one is refused, and the key belongs to vibe
// alone.
func TestVibeJobIDs(t *testing.T) {
	env := map[string]string{"V": liveVibeSecret, "G": "gh-secret"}
	srcs, err := loadConfig(t, `
[[source]]
name = "vibe"
scheme = "vibe"
job_ids = ["job_digest", "job_report"]
[[source.secret]]
env = "V"
`, env)
	if err != nil {
		t.Fatal(err)
	}
	v, ok := srcs[0].Scheme.(scheme.Vibe)
	if !ok || !slices.Equal(v.JobIDs, []string{"job_digest", "job_report"}) {
		t.Errorf("scheme = %#v, want vibe expecting job_digest and job_report", srcs[0].Scheme)
	}
	for conf, want := range map[string]string{
		"[[source]]\nname = \"vibe\"\nscheme = \"vibe\"\njob_ids = [\"job_1\", \"\"]\n[[source.secret]]\nenv = \"V\"\n": "empty jobId",
		"[[source]]\nname = \"gh\"\nscheme = \"github\"\njob_ids = [\"job_1\"]\n[[source.secret]]\nenv = \"G\"\n":       "job_ids belongs to scheme vibe only",
	} {
		if _, err := loadConfig(t, conf, env); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want %q", err, want)
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
