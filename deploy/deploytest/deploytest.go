// Package deploytest reads the files shipped in deploy/ for the tests that
// check them.
package deploytest

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// envLine is one variable of an environment file, set or commented out.
var envLine = regexp.MustCompile(`^(#?)([A-Z][A-Z0-9_]*)=(.*)$`)

// EnvFile reads the environment file name of deploy/ (inbox.env,
// inbox-postgres.env) as systemd does: each variable, set or commented
// out, and its value, one pair of enclosing quotes removed. It fails tb
// when the file cannot be read.
func EnvFile(tb testing.TB, name string) (set, commented map[string]string) {
	tb.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		tb.Fatal("deploytest: cannot locate deploy/")
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", name))
	if err != nil {
		tb.Fatalf("deploytest: %v", err)
	}
	set, commented = map[string]string{}, map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if m := envLine.FindStringSubmatch(l); m != nil {
			v := m[3]
			if len(v) >= 2 && (v[0] == '\'' || v[0] == '"') && v[len(v)-1] == v[0] {
				v = v[1 : len(v)-1]
			}
			if m[1] == "" {
				set[m[2]] = v
			} else {
				commented[m[2]] = v
			}
		}
	}
	return set, commented
}
