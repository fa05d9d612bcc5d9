package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"inbox/config"
)

const oneSource = `
[[source]]
name = "sume"
scheme = "sume"
[[source.secret]]
value = "s"
`

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "inbox.toml")
	if err := os.WriteFile(p, []byte(oneSource+body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadDestinations(t *testing.T) {
	env := map[string]string{"BILLING_SECRET": "whsec_c2VjcmV0"}
	p := writeConfig(t, `
[[destination]]
name = "billing"
url = "https://billing.internal/jobs"
secret_env = "BILLING_SECRET"
sources = ["sume"]
events = ["job.completed"]
workers = 8
timeout = "10s"
retry_schedule = "1s,5s"
rate = "600/m"
max_slow = 0

[[destination]]
name = "audit"
exec = "./audit.sh"
`)
	ds, err := config.LoadDestinations(p, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 {
		t.Fatalf("got %d destinations, want 2", len(ds))
	}
	b := ds[0]
	if b.Name != "billing" || b.Secret != env["BILLING_SECRET"] || b.Workers != 8 || b.Timeout.String() != "10s" ||
		b.RetrySchedule != "1s,5s" || b.Rate != 10 || b.MaxSlow == nil || *b.MaxSlow != 0 || b.Route().Takes("vibe", "job.completed") ||
		!b.Route().Takes("sume", "job.completed") {
		t.Errorf("billing = %+v", b)
	}
	if a := ds[1]; a.Exec != "./audit.sh" || !a.Route().Takes("vibe", "anything") {
		t.Errorf("audit = %+v", a)
	}
}

func TestLoadDestinationsRefuses(t *testing.T) {
	const secret = "whsec_c2VjcmV0"
	for name, body := range map[string]string{
		"no kind":          `name = "a"`,
		"two kinds":        `name = "a"` + "\n" + `url = "http://x"` + "\n" + `exec = "true"`,
		"bad name":         `name = "A b"` + "\n" + `exec = "true"`,
		"nats half":        `name = "a"` + "\n" + `nats_url = "nats://x"`,
		"secret with exec": `name = "a"` + "\n" + `exec = "true"` + "\n" + `secret = "` + secret + `"`,
		"secret both ways": `name = "a"` + "\n" + `url = "http://x"` + "\n" + `secret = "` + secret + `"` + "\n" + `secret_env = "S"`,
		"secret_env unset": `name = "a"` + "\n" + `url = "http://x"` + "\n" + `secret_env = "UNSET_SECRET"`,
		"placeholder":      `name = "a"` + "\n" + `url = "http://x"` + "\n" + `secret = "whsec_replace-with-a-secret"`,
		"unknown source":   `name = "a"` + "\n" + `exec = "true"` + "\n" + `sources = ["vibe"]`,
		"unknown key":      `name = "a"` + "\n" + `exec = "true"` + "\n" + `Workers = 2`,
		"bad rate":         `name = "a"` + "\n" + `exec = "true"` + "\n" + `rate = "fast"`,
		"bad timeout":      `name = "a"` + "\n" + `exec = "true"` + "\n" + `timeout = "soon"`,
		"not http":         `name = "a"` + "\n" + `url = "ftp://x"`,
		"duplicate name":   `name = "a"` + "\n" + `exec = "true"` + "\n[[destination]]\n" + `name = "a"` + "\n" + `exec = "true"`,
		"negative workers": `name = "a"` + "\n" + `exec = "true"` + "\n" + `workers = -1`,
	} {
		t.Run(name, func(t *testing.T) {
			p := writeConfig(t, "[[destination]]\n"+body+"\n")
			_, err := config.LoadDestinations(p, func(string) string { return "" })
			if err == nil {
				t.Fatal("loaded")
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "c2VjcmV0") {
				t.Errorf("error %q holds the secret", err)
			}
		})
	}
}

// TestLoadDestinationsSecretMessage: a secret that is not whsec_ and
// base64 is named once, by the table's key.
func TestLoadDestinationsSecretMessage(t *testing.T) {
	p := writeConfig(t, "[[destination]]\nname = \"a\"\nurl = \"http://x\"\nsecret = \"whsec_!!\"\n")
	_, err := config.LoadDestinations(p, func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), "(a): secret: the part after whsec_ is not base64") || strings.Contains(err.Error(), "secret: secret:") {
		t.Errorf("error %v, want the key secret named once", err)
	}
}

// TestSyntaxErrorQuotesNoValue: a secret written without its quotes is a
// syntax error whose message must not carry the secret's first letters,
// in the destinations' reading and the sources' alike.
func TestSyntaxErrorQuotesNoValue(t *testing.T) {
	for name, body := range map[string]string{
		"destination": "[[destination]]\nname = \"a\"\nurl = \"http://x\"\nsecret = vjsQ9secretvalue\n",
		"source":      "[[source]]\nname = \"b\"\nscheme = \"sume\"\n[[source.secret]]\nvalue = vjsQ9secretvalue\n",
		"quoted":      "[[destination]]\nname = \"a\"\nsecret = \"vjsQ9secretvalue\" x\n",
	} {
		p := writeConfig(t, body)
		_, derr := config.LoadDestinations(p, func(string) string { return "" })
		_, serr := config.LoadSources(p, func(string) string { return "" })
		for _, err := range []error{derr, serr} {
			if err == nil {
				t.Fatalf("%s: loaded a file with a syntax error", name)
			}
			if strings.Contains(err.Error(), "vjs") {
				t.Errorf("%s: error %q quotes the value", name, err)
			}
			if !strings.Contains(err.Error(), "line ") {
				t.Errorf("%s: error %q does not say where", name, err)
			}
		}
	}
}
