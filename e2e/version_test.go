package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestVersionNamesTheBuild runs the tests' binary, built as the README
// builds a release (the commit through -ldflags, -buildvcs=false): --version
// names the VERSION file's version and that commit. The build that says
// nothing of its commit is the root package's TestVersionWithoutCommit.
func TestVersionNamesTheBuild(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		t.Fatal("VERSION is empty")
	}
	want := "inbox version " + v + " (commit " + buildCommit + ")\n"
	out, err := exec.Command(binary(t), "--version").CombinedOutput()
	if err != nil || string(out) != want {
		t.Errorf("--version printed %q (%v), want %q", out, err, want)
	}
}
