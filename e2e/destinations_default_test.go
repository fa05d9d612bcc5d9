package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"inbox/deploy/deploytest"
	"inbox/testport"
)

// TestDestinationsDefaultAdmin runs inbox destinations without --admin.
// It asks the admin address the shipped inbox.env gives serve, or serve's
// own variable INBOX_ADMIN_ADDR when it is set, rather than printing its
// whole help and "Required flag"; its --help names the shipped address as
// the default. Where nothing answers, the one line of its error names the
// address it asked.
func TestDestinationsDefaultAdmin(t *testing.T) {
	t.Parallel()
	set, _ := deploytest.EnvFile(t, "inbox.env")
	shipped := "http://" + set["INBOX_ADMIN_ADDR"]
	help, _, code := runCLI(t, nil, "destinations", "--help")
	if want := `(default: "` + shipped + `") [$INBOX_ADMIN_URL, $INBOX_ADMIN_ADDR]`; code != 0 || !strings.Contains(help, want) {
		t.Errorf("destinations --help: exit %d, want --admin's default and variables %s:\n%s", code, want, help)
	}

	db := filepath.Join(t.TempDir(), "inbox.db")
	s := startServer(t, db, "--admin-addr", "127.0.0.1:0", "--forward-url", "http://127.0.0.1:1/jobs")
	hostPort := strings.TrimPrefix(s.admin, "http://")
	for _, env := range [][]string{
		{"INBOX_ADMIN_ADDR=" + hostPort},
		{"INBOX_ADMIN_URL=", "INBOX_ADMIN_ADDR=" + hostPort},
		{"INBOX_ADMIN_ADDR=" + strings.Replace(hostPort, "127.0.0.1", "0.0.0.0", 1)},
	} {
		out, errOut, code := runCLI(t, env, "destinations")
		if code != 0 || !strings.HasPrefix(out, "NAME") || !strings.Contains(out, "default") {
			t.Errorf("%v destinations: exit %d, stdout %q, stderr %q; want serve's destination default", env, code, out, errOut)
		}
	}
	if out, errOut, code := runCLI(t, nil, "destinations", "--admin", hostPort); code != 0 || !strings.Contains(out, "default") {
		t.Errorf("destinations --admin %s: exit %d, stdout %q, stderr %q", hostPort, code, out, errOut)
	}

	// Where nothing answers (a port the test held and closed, not the
	// shipped one, which something else on the machine may serve): one
	// line naming the address asked and what to do.
	closed := testport.Addr(t)
	out, errOut, code := runCLI(t, []string{"INBOX_ADMIN_URL=", "INBOX_ADMIN_ADDR=" + closed}, "destinations")
	if code == 0 || out != "" || strings.Count(strings.TrimSpace(errOut), "\n") != 0 ||
		!strings.Contains(errOut, "--admin http://"+closed+": GET /destinations: ") || !strings.Contains(errOut, "give --admin the URL") {
		t.Errorf("destinations with nothing at %s: exit %d, stdout %q, stderr %q; want one line naming the address and what to do", closed, code, out, errOut)
	}
}
