package e2e

import (
	"strings"
	"testing"
)

// TestFlagErrorsEchoAsTyped gives the commands' duration flags values they
// refuse, written as an operator writes them: each error quotes the value
// as typed, not as the flag parser normalised it (1d is not echoed 24h,
// 90m not 1h30m).
func TestFlagErrorsEchoAsTyped(t *testing.T) {
	t.Parallel()
	db := fillDB(t, 0)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"purge", "--db", db, "--older-than", "1d"}, `--older-than "1d"`},
		{[]string{"purge", "--db", db, "--older-than", " 2d "}, `--older-than " 2d "`},
		{[]string{"parked", "--db", db, "--per-hour", "--since", "90m"}, `--since "90m"`},
		{[]string{"parked", "--db", db, "--since", "-1d"}, `--since "-1d"`},
		{[]string{"alert", "--db", db, "--parked-every-hour", "90m"}, `--parked-every-hour "90m"`},
		{[]string{"list", "--db", db, "--timeout", "0s"}, `--timeout "0s"`},
	} {
		_, errOut, code := runCLI(t, nil, tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: exit %d, %q; want it to echo %s", strings.Join(tc.args, " "), code, errOut, tc.want)
		}
	}
}
