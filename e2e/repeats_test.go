package e2e

import (
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
)

// helpOption is one flag an --help lists: its name, and whether it takes
// a value, and whether a list of them ([ --name value ]).
type helpOption struct {
	name        string
	value, list bool
}

// helpOptions returns the flags an --help output lists under its options,
// --help itself left out.
func helpOptions(help string) []helpOption {
	_, opts, _ := strings.Cut(help, "OPTIONS:\n")
	var out []helpOption
	for _, m := range regexp.MustCompile(`(?m)^\s+--([a-z0-9-]+)((?:, -[a-z])?) (value)?( \[ --)?`).FindAllStringSubmatch(opts, -1) {
		if m[1] == "help" {
			continue
		}
		out = append(out, helpOption{name: m[1], value: m[3] != "", list: m[4] != ""})
	}
	return out
}

// TestRepeatedFlagRefused gives every flag of every command that takes one
// value twice, with two different values, through the real binary: each
// must be refused before the command does anything, naming the flag and
// both values, rather than the last silently kept (list --status done
// --status parked listing the parked rows alone). A flag that takes a list
// may repeat, and so may a flag given twice alike.
func TestRepeatedFlagRefused(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "missing.db")
	type run struct {
		args []string
		want string // in stderr
	}
	var runs []run
	helps := commandHelps(t)
	names := make([]string, 0, len(helps))
	for name := range helps {
		names = append(names, name)
	}
	sort.Strings(names)
	single := 0
	for _, name := range names {
		if name == "" || name == "help" {
			continue
		}
		for _, o := range helpOptions(helps[name]) {
			if o.list {
				continue
			}
			first, second := "1", "2"
			args := []string{name, "--" + o.name, first, "--" + o.name, second}
			if !o.value {
				first, second = "true", "false"
				args = []string{name, "--" + o.name, "--" + o.name + "=false"}
			}
			single++
			runs = append(runs, run{args, fmt.Sprintf("--%s given twice, %q and %q: it takes one value", o.name, first, second)})
		}
	}
	// The flags of every command that select rows, by name, so the sweep
	// above cannot pass by finding none.
	for _, cmd := range []string{"list", "parked", "replay", "reprocess", "purge", "alert", "stats"} {
		if !strings.Contains(helps[cmd], "--db value") {
			t.Errorf("%s --help lists no --db: the sweep reads the wrong help", cmd)
		}
	}
	if single < 150 {
		t.Fatalf("found %d single-valued flags in the commands' --help: too few, the sweep reads it wrong", single)
	}
	runs = append(runs,
		run{[]string{"list", "--event", "push", "--event", "ping"}, `--event given twice, "push" and "ping": it takes one value, and the second would silently replace the first; give it once, or run list once per value`},
		run{[]string{"list", "--status", "done", "--status=parked"}, `--status given twice, "done" and "parked"`},
		run{[]string{"parked", "--reason", "conflict", "--reason", "too_large"}, `--reason given twice, "conflict" and "too_large"`},
		run{[]string{"reprocess", "--db", "a.db", "--db", "b.db", "--all"}, `--db given twice, "a.db" and "b.db"`},
		run{[]string{"replay", "--destination", "crm", "--destination", "billing"}, `--destination given twice, "crm" and "billing"`},
		// alert's refusals keep its exit code for a broken command (2).
		run{[]string{"alert", "--max-age", "1h", "--max-age", "2h"}, `--max-age given twice, "1h" and "2h"`},
		// A list, and a flag given twice alike, are read as ever: here the
		// database is what is missing.
		run{[]string{"reprocess", "--db", missing, "--event", "job.completed", "--event", "job.failed", "--all"}, "no inbox database"},
		run{[]string{"list", "--db", missing, "--db", missing, "--json", "--json"}, "no inbox database"},
	)

	var mu sync.Mutex
	work := make(chan run)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range work {
				out, errOut, code := runCLI(t, nil, r.args...)
				mu.Lock()
				if code == 0 || !strings.Contains(errOut, r.want) || out != "" {
					t.Errorf("inbox %s: exit %d, stdout %q, stderr %q; want an error holding %q", strings.Join(r.args, " "), code, out, errOut, r.want)
				}
				if r.args[0] == "alert" && strings.Contains(r.want, "given twice") && code != 2 {
					t.Errorf("inbox %s: exit %d, want alert's 2 for a broken command", strings.Join(r.args, " "), code)
				}
				mu.Unlock()
			}
		}()
	}
	for _, r := range runs {
		work <- r
	}
	close(work)
	wg.Wait()
}
