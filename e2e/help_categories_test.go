package e2e

import (
	"regexp"
	"strings"
	"testing"
)

// TestHelpFlagCategories reads serve's and dispatch's --help: their flags
// are grouped under headings (Listening, Store, ...), none left above the
// first heading, where urfave/cli puts a flag without one; -h and
// inbox help COMMAND say the same.
func TestHelpFlagCategories(t *testing.T) {
	t.Parallel()
	heading := regexp.MustCompile(`^   [A-Z][A-Za-z ]+$`)
	for _, tt := range []struct {
		command  string
		headings []string
	}{
		{"serve", []string{"Destinations", "Dispatch", "Limits", "Listening", "Logging and help", "Polling Sume", "Sources and secrets", "Store"}},
		{"dispatch", []string{"Destinations", "Dispatch", "Listening", "Logging and help", "Polling Sume", "Store"}},
	} {
		help, errOut, code := runCLI(t, nil, tt.command, "--help")
		if code != 0 {
			t.Fatalf("%s --help: exit %d: %s", tt.command, code, errOut)
		}
		for _, args := range [][]string{{tt.command, "-h"}, {"help", tt.command}} {
			if out, _, code := runCLI(t, nil, args...); code != 0 || out != help {
				t.Errorf("%v: exit %d, and not what %s --help says:\n%s", args, code, tt.command, out)
			}
		}
		_, opts, ok := strings.Cut(help, "\nOPTIONS:\n")
		if !ok {
			t.Fatalf("%s --help has no OPTIONS:\n%s", tt.command, help)
		}
		var headings []string
		flags := 0
		under := map[string]int{}
		for _, line := range strings.Split(opts, "\n") {
			switch {
			case heading.MatchString(line):
				headings = append(headings, strings.TrimSpace(line))
			case strings.HasPrefix(line, "   --"):
				flags++
				if len(headings) == 0 {
					t.Errorf("%s --help: %q is under no heading", tt.command, strings.Fields(line)[0])
					continue
				}
				under[headings[len(headings)-1]]++
			}
		}
		if strings.Join(headings, "|") != strings.Join(tt.headings, "|") {
			t.Errorf("%s --help: headings %q, want %q", tt.command, headings, tt.headings)
		}
		for _, h := range headings {
			if under[h] == 0 {
				t.Errorf("%s --help: heading %q holds no flag", tt.command, h)
			}
		}
		if len(helpFlags(help)) != flags || flags < 20 {
			t.Errorf("%s --help: %d flag lines under headings, %d flags in all", tt.command, flags, len(helpFlags(help)))
		}
	}
}
