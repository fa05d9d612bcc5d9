package e2e

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// maxReadmeLines bounds the front page: the depth belongs in docs/.
const maxReadmeLines = 300

// docFiles returns README.md and every docs/*.md, relative to the
// repository's root.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no docs/*.md")
	}
	return append([]string{"../README.md"}, files...)
}

// markdown is a markdown file split into its prose (the lines outside
// fenced code blocks) and the lines of its fenced blocks of shell.
type markdown struct {
	prose []string // the lines outside fenced blocks, inline code still in
	shell []string // the lines of fenced blocks of shell or crontab
}

// shellBlock says which fenced blocks hold commands to check.
var shellBlock = map[string]bool{"sh": true, "shell": true, "bash": true, "crontab": true}

var fence = regexp.MustCompile("^\\s*(```+|~~~+)\\s*")

func readMarkdown(t *testing.T, path string) markdown {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var md markdown
	open, lang := "", ""
	for _, l := range strings.Split(string(b), "\n") {
		if m := fence.FindStringSubmatch(l); m != nil {
			switch {
			case open == "":
				open, lang = m[1][:3], strings.TrimSpace(l[len(m[0]):])
				continue
			case strings.HasPrefix(m[1], open):
				open = ""
				continue
			}
		}
		if open != "" {
			if shellBlock[lang] {
				md.shell = append(md.shell, l)
			}
		} else {
			md.prose = append(md.prose, l)
		}
	}
	return md
}

var codeSpan = regexp.MustCompile("(`+)(.+?)(`+)")

// spans returns the inline code spans of the prose lines.
func (md markdown) spans() []string {
	var out []string
	for _, l := range md.prose {
		for _, m := range codeSpan.FindAllStringSubmatch(l, -1) {
			out = append(out, m[2])
		}
	}
	return out
}

// headingLine is an ATX heading.
var headingLine = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)

// anchors returns the anchors GitHub gives the file's headings.
func (md markdown) anchors() map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range md.prose {
		m := headingLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		a := anchor(m[2])
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

var inlineLink = regexp.MustCompile(`\[([^\]]*)\]\(([^)\s]*)[^)]*\)`)

// anchor returns the anchor GitHub makes of a heading's text: links
// reduced to their text, then lowercased, every character but letters,
// digits, spaces, hyphens and underscores dropped, spaces made hyphens.
func anchor(heading string) string {
	heading = inlineLink.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// links returns the targets of the prose's inline links, code spans left
// out.
func (md markdown) links() []string {
	var out []string
	for _, l := range md.prose {
		l = codeSpan.ReplaceAllString(l, "")
		for _, m := range inlineLink.FindAllStringSubmatch(l, -1) {
			out = append(out, m[2])
		}
	}
	return out
}

// TestDocsAnchors checks anchor against headings whose GitHub anchors are
// known.
func TestDocsAnchors(t *testing.T) {
	t.Parallel()
	for heading, want := range map[string]string{
		"reprocess: run today's rules over parked bodies": "reprocess-run-todays-rules-over-parked-bodies",
		"Several VMs, one PostgreSQL":                     "several-vms-one-postgresql",
		"The application failed: `handler_failed`":        "the-application-failed-handler_failed",
		"1. Build":                             "1-build",
		"A 204 means committed on the primary": "a-204-means-committed-on-the-primary",
		"See [the page](docs/x.md) now":        "see-the-page-now",
	} {
		if got := anchor(heading); got != want {
			t.Errorf("anchor(%q) = %q, want %q", heading, got, want)
		}
	}
}

// TestDocsLinks checks that every relative link of README.md and
// docs/*.md names a file or folder of the repository, and an anchor of
// its headings when it has one, and that README.md stays a front page.
func TestDocsLinks(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	pages := map[string]markdown{}
	for _, f := range docFiles(t) {
		abs, err := filepath.Abs(f)
		if err != nil {
			t.Fatal(err)
		}
		pages[abs] = readMarkdown(t, abs)
	}
	for path, md := range pages {
		name, _ := filepath.Rel(root, path)
		for _, target := range md.links() {
			u, err := url.Parse(target)
			if err != nil {
				t.Errorf("%s: link %q: %v", name, target, err)
				continue
			}
			if u.Scheme != "" || u.Host != "" {
				continue // not relative: another site's
			}
			dest := path
			if u.Path != "" {
				dest = filepath.Join(filepath.Dir(path), filepath.FromSlash(u.Path))
			}
			if rel, err := filepath.Rel(root, dest); err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("%s: link %q leaves the repository", name, target)
				continue
			}
			if _, err := os.Stat(dest); err != nil {
				t.Errorf("%s: link %q: no such file", name, target)
				continue
			}
			if u.Fragment == "" {
				continue
			}
			to, ok := pages[dest]
			if !ok {
				if !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s: link %q: an anchor in a file that is not markdown", name, target)
					continue
				}
				to = readMarkdown(t, dest)
			}
			if !to.anchors()[u.Fragment] {
				t.Errorf("%s: link %q: no heading with anchor #%s", name, target, u.Fragment)
			}
		}
	}
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, want at most %d: move the depth to docs/", n, maxReadmeLines)
	}
}

// helpFlags returns the flags an --help output lists under its options.
func helpFlags(help string) map[string]bool {
	out := map[string]bool{}
	_, opts, _ := strings.Cut(help, "OPTIONS:\n")
	for _, m := range regexp.MustCompile(`(?m)^\s+(--[a-z0-9-]+)`).FindAllStringSubmatch(opts, -1) {
		out[m[1]] = true
	}
	return out
}

// commandHelps returns the binary's --help, under "", and each of its
// commands' --help, by name.
func commandHelps(t *testing.T) map[string]string {
	t.Helper()
	top, errOut, code := runCLI(t, nil, "--help")
	if code != 0 {
		t.Fatalf("--help: exit %d: %s", code, errOut)
	}
	_, list, _ := strings.Cut(top, "COMMANDS:\n")
	list, _, _ = strings.Cut(list, "\nGLOBAL OPTIONS:")
	helps := map[string]string{"": strings.Replace(top, "GLOBAL OPTIONS:", "OPTIONS:", 1)}
	for _, m := range regexp.MustCompile(`(?m)^\s+([a-z]+)(?:, [a-z]+)?\s`).FindAllStringSubmatch(list, -1) {
		name := m[1]
		if name == "help" {
			helps[name] = ""
			continue
		}
		out, errOut, code := runCLI(t, nil, name, "--help")
		if code != 0 {
			t.Fatalf("%s --help: exit %d: %s", name, code, errOut)
		}
		helps[name] = out
	}
	if len(helps) < 10 {
		t.Fatalf("--help lists %d commands: too few to check against", len(helps))
	}
	return helps
}

// TestDocsReferences checks that where the commands' --help and the files
// of deploy/ point at a page of docs/ (docs/dispatch.md, "Destinations
// that hang"), the page and its heading are there.
func TestDocsReferences(t *testing.T) {
	t.Parallel()
	texts := map[string]string{}
	for name, help := range commandHelps(t) {
		texts["inbox "+name+" --help"] = help
	}
	files, err := filepath.Glob("../deploy/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if fi, err := os.Stat(f); err != nil || fi.IsDir() {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		texts[strings.TrimPrefix(f, "../")] = string(b)
	}
	// A reference may wrap: a comment's # and a help's indent are spaces.
	space := regexp.MustCompile(`\s*\n[\s#]*`)
	ref := regexp.MustCompile(`\bdocs/([a-z]+\.md)(?:, "([^"]+)")?`)
	found := 0
	for name, text := range texts {
		for _, m := range ref.FindAllStringSubmatch(space.ReplaceAllString(text, " "), -1) {
			found++
			page := filepath.Join("..", "docs", m[1])
			if _, err := os.Stat(page); err != nil {
				t.Errorf("%s points at docs/%s, which does not exist", name, m[1])
				continue
			}
			if m[2] != "" && !readMarkdown(t, page).anchors()[anchor(m[2])] {
				t.Errorf("%s points at docs/%s, %q: no such heading", name, m[1], m[2])
			}
		}
	}
	if found < 5 {
		t.Errorf("found %d references to docs/: too few, the parsing is broken", found)
	}
}

// TestDocsNameRealCommands checks README.md and docs/*.md against the
// binary: every `inbox <command>` they name in code is one of its
// commands, every flag given to one is in that command's --help, and
// every flag named on its own is in some command's --help.
func TestDocsNameRealCommands(t *testing.T) {
	t.Parallel()
	flags := map[string]map[string]bool{}
	anyFlag := map[string]bool{}
	for name, help := range commandHelps(t) {
		flags[name] = helpFlags(help)
		if name == "" {
			continue
		}
		for f := range flags[name] {
			anyFlag[f] = true
		}
	}

	// Fields that end a command on a line of shell.
	ends := func(f string) bool {
		return slices.Contains([]string{"|", "||", "&&", ";", "#", "&", ")"}, f) || strings.HasPrefix(f, "#")
	}
	word := regexp.MustCompile(`^[a-z][a-z-]*$`)
	clean := strings.NewReplacer(`'`, " ", `"`, " ", "(", " ", "$", " ")
	checked := 0
	for _, f := range docFiles(t) {
		md := readMarkdown(t, f)
		name := strings.TrimPrefix(f, "../")
		// check reads one line of shell, or one code span, for the
		// commands it runs and the flags it gives them.
		check := func(code string, span bool) {
			fields := strings.Fields(clean.Replace(code))
			if c := slices.IndexFunc(fields, func(f string) bool { return strings.HasPrefix(f, "#") }); c >= 0 {
				fields = fields[:c] // a comment
			}
			for i := 0; i < len(fields); i++ {
				cmd, args := "", i+1
				switch {
				case span && i == 0 && fields[0] != "" && flags[fields[0]] != nil:
					cmd = fields[0] // `alert --max-age 24h`: a command named alone
				case fields[i] == "inbox" || fields[i] == "/usr/local/bin/inbox",
					fields[i] == "." && i >= 2 && fields[i-2] == "go" && fields[i-1] == "run":
					if i > 0 && slices.Contains([]string{"-u", "-o", "-g"}, fields[i-1]) {
						continue // the inbox user or group
					}
					if i+1 == len(fields) {
						continue
					}
					next := fields[i+1]
					switch {
					case strings.HasPrefix(next, "--"):
						// inbox --version: the global flags; inbox --check
						// list ...: they, then a command
						j := i + 1
						for j < len(fields) && flags[""][fields[j]] {
							j++
						}
						if j > i+1 && j < len(fields) && flags[fields[j]] != nil {
							cmd, args = fields[j], j+1
						}
					case word.MatchString(next) && next != "sh" && !strings.HasPrefix(next, "inbox"):
						cmd, args = next, i+2
					default:
						continue
					}
					if flags[cmd] == nil {
						t.Errorf("%s: %q names inbox %s, which is no command of the binary", name, code, cmd)
						continue
					}
				default:
					continue
				}
				checked++
				for _, a := range fields[args:] {
					if ends(a) || strings.HasSuffix(a, ";") {
						break
					}
					if !strings.HasPrefix(a, "--") {
						continue
					}
					flag, _, _ := strings.Cut(a, "=")
					flag = strings.TrimRight(flag, ",.:`")
					if !flags[cmd][flag] {
						t.Errorf("%s: %q gives inbox %s %s, which its --help does not list", name, code, cmd, flag)
					}
				}
			}
		}
		for _, l := range md.shell {
			check(l, false)
		}
		for _, s := range md.spans() {
			if strings.HasPrefix(s, "--") {
				flag := strings.Fields(s)[0]
				flag, _, _ = strings.Cut(flag, "=")
				if !anyFlag[flag] && !flags[""][flag] {
					t.Errorf("%s: `%s` names %s, which no command's --help lists", name, s, flag)
				}
				checked++
				continue
			}
			check(s, true)
		}
	}
	if checked < 100 {
		t.Errorf("checked %d commands and flags in the docs: too few, the parsing is broken", checked)
	}
}
