package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersionNamesTheBuild takes the tests' binary, built as a release
// would be without a checkout (-buildvcs=false), and builds it again with
// the commit given through -ldflags as the README builds it: --version
// names the VERSION file's version either way, and the commit, or says
// plainly that it is unknown.
func TestVersionNamesTheBuild(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	want := "inbox version " + strings.TrimSpace(string(b))
	if strings.TrimSpace(string(b)) == "" {
		t.Fatal("VERSION is empty")
	}
	const rev = "0123456789abcdef0123456789abcdef01234567"
	for _, tt := range []struct {
		flags []string
		want  string
	}{
		{[]string{"-buildvcs=false"}, want + " (commit unknown)\n"},
		{[]string{"-buildvcs=false", "-ldflags", "-X main.commit=" + rev}, want + " (commit " + rev + ")\n"},
	} {
		bin := binary(t) // built -buildvcs=false
		if len(tt.flags) > 1 {
			bin = filepath.Join(t.TempDir(), "inbox")
			build := exec.Command("go", append(append([]string{"build"}, tt.flags...), "-o", bin, "inbox")...)
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("go build %v: %v\n%s", tt.flags, err, out)
			}
		}
		out, err := exec.Command(bin, "--version").CombinedOutput()
		if err != nil || string(out) != tt.want {
			t.Errorf("built with %v: --version printed %q (%v), want %q", tt.flags, out, err, tt.want)
		}
	}
}
