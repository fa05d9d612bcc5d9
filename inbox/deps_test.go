package inbox_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDomainHoldsNoSQL checks that the domain package, and everything it
// imports, names no database/sql and no database driver: the stores adapt
// it, never the other way round.
func TestDomainHoldsNoSQL(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 2 {
		t.Fatalf("go list -deps listed %q: too little to judge", deps)
	}
	for _, dep := range deps {
		switch {
		case dep == "database/sql", strings.HasPrefix(dep, "database/sql/"),
			strings.HasPrefix(dep, "modernc.org/sqlite"), strings.HasPrefix(dep, "github.com/jackc/"),
			dep == "inbox/sqlite", dep == "inbox/postgres":
			t.Errorf("inbox depends on %s", dep)
		}
	}
}
