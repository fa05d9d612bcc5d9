// Package deploy holds what start-up must know of the files shipped in
// this folder for a deployment (inbox.env, inbox.toml): the placeholder
// secrets they carry, which anyone who has read the repository knows.
package deploy

import (
	_ "embed"
	"regexp"
	"strings"
)

var (
	//go:embed inbox.env
	envFile string
	//go:embed inbox.toml
	tomlFile string
)

// placeholderMark is in every placeholder the files carry, and in no real
// secret: base64 and hex have no such run of words.
const placeholderMark = "replace-with"

// The lines of the shipped files that hold a secret, set or commented out:
// a variable whose name says SECRET in inbox.env, a value = in inbox.toml.
var (
	envSecretLine  = regexp.MustCompile(`(?m)^#?\s*[A-Z0-9_]*SECRET[A-Z0-9_]*=(.*)$`)
	tomlSecretLine = regexp.MustCompile(`(?m)^#?\s*value\s*=\s*"([^"]*)"`)
)

// Placeholder reports whether secret is, or holds, one of the placeholder
// secrets of the shipped inbox.env or inbox.toml (each value of a
// comma-separated list counts), so that start-up can refuse it: a process
// verifying with a published secret lets anyone store rows.
func Placeholder(secret string) bool {
	secret = strings.TrimSpace(secret)
	if secret == "" {
		return false
	}
	if strings.Contains(strings.ToLower(secret), placeholderMark) {
		return true
	}
	for _, v := range placeholders() {
		if secret == v {
			return true
		}
	}
	return false
}

// placeholders returns every secret value the shipped files carry.
func placeholders() []string {
	var out []string
	for _, m := range envSecretLine.FindAllStringSubmatch(envFile, -1) {
		for v := range strings.SplitSeq(m[1], ",") {
			if v = strings.TrimSpace(v); v != "" {
				out = append(out, v)
			}
		}
	}
	for _, m := range tomlSecretLine.FindAllStringSubmatch(tomlFile, -1) {
		if v := strings.TrimSpace(m[1]); v != "" {
			out = append(out, v)
		}
	}
	return out
}
