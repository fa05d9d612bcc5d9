package e2e

import (
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestAlertHelpExamples runs every example of alert --help through the
// binary, as written but for the database, the config file and the
// webhooks (a stand-in), against an empty inbox: none is a mistake (exit
// 2). And every value an option's help offers as an example, such as
// (90m, 24h, 30d), is taken by that option.
func TestAlertHelpExamples(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "inbox.db")
	cfg := writeConfig(t, dir, sumeSourceTOML)
	startServer(t, db) // creates it
	h := newHook(t, http.StatusOK)
	help, errOut, code := runCLI(t, nil, "alert", "--help")
	if code != 0 {
		t.Fatalf("alert --help: exit %d: %s", code, errOut)
	}
	_, examples, ok := strings.Cut(help, "Examples:\n")
	examples, options, ok2 := strings.Cut(examples, "OPTIONS:\n")
	if !ok || !ok2 {
		t.Fatalf("alert --help has no Examples: or no OPTIONS:\n%s", help)
	}
	url := regexp.MustCompile(`https?://\S+`)
	ran := 0
	for line := range strings.SplitSeq(strings.TrimSpace(examples), "\n") {
		fields := strings.Fields(line)
		at := -1
		for i, f := range fields {
			if (f == "inbox" || strings.HasSuffix(f, "/inbox")) && i+1 < len(fields) && fields[i+1] == "alert" {
				at = i
				break
			}
		}
		if at < 0 {
			t.Errorf("example %q runs no inbox alert", line)
			continue
		}
		var env []string
		for _, f := range fields[:at] {
			if name, _, ok := strings.Cut(f, "="); ok && strings.ToUpper(name) == name {
				env = append(env, url.ReplaceAllString(f, h.url()))
			}
		}
		args := []string{"alert"}
		for i := at + 2; i < len(fields) && !strings.HasPrefix(fields[i], "("); i++ {
			args = append(args, url.ReplaceAllString(fields[i], h.url()))
		}
		for i := range args {
			switch args[i] {
			case "--db":
				args[i+1] = db
			case "--config":
				args[i+1] = cfg
			}
		}
		if !strings.Contains(line, "--db") {
			args = append(args, "--db", db)
		}
		if out, errOut, code := runCLI(t, env, args...); code != 0 && code != 1 {
			t.Errorf("example %q: exit %d, stdout %q, stderr %q; want 0 or 1", line, code, out, errOut)
		}
		ran++
	}
	if ran < 10 {
		t.Errorf("ran %d examples of alert --help: too few, the parsing is broken", ran)
	}

	// The options' own examples: --flag (a, b, c), (whole hours: a, b),
	// (default: a).
	option := regexp.MustCompile(`(?m)^\s+--([a-z-]+) value\b(.*)$`)
	group := regexp.MustCompile(`\(([^()]*)\)`)
	value := regexp.MustCompile(`^\d+(ms|s|m|h|d)$`)
	offered := 0
	for _, m := range option.FindAllStringSubmatch(options, -1) {
		for _, g := range group.FindAllStringSubmatch(m[2], -1) {
			list := g[1]
			if _, after, ok := strings.Cut(list, ":"); ok {
				list = after
			}
			for v := range strings.SplitSeq(list, ",") {
				if v = strings.Trim(strings.TrimSpace(v), `"`); !value.MatchString(v) {
					continue
				}
				args := []string{"alert", "--db", db, "--" + m[1], v}
				if m[1] == "source" {
					args = append(args, "--quiet-for", "1h")
				}
				if out, errOut, code := runCLI(t, nil, args...); code != 0 && code != 1 {
					t.Errorf("alert --%s %s, as its help offers: exit %d, stdout %q, stderr %q; want 0 or 1", m[1], v, code, out, errOut)
				}
				offered++
			}
		}
	}
	if offered < 10 {
		t.Errorf("tried %d values the options offer: too few, the parsing is broken", offered)
	}
}
