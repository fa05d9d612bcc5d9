package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRedisDocsExamplesParse runs inbox --check dispatch on each TOML
// example of docs/dispatch.md that configures a Redis destination: each
// is a table the binary takes. A table with a URL no server could take is
// refused the same way, naming no password.
func TestRedisDocsExamplesParse(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/dispatch.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, part := range strings.Split(string(doc), "```toml\n")[1:] {
		block, _, _ := strings.Cut(part, "```")
		if strings.Contains(block, "redis_url") {
			blocks = append(blocks, block)
		}
	}
	if len(blocks) < 2 {
		t.Fatalf("docs/dispatch.md has %d TOML examples of a Redis destination, want the stream's and the queue's", len(blocks))
	}
	dir := t.TempDir()
	for i, block := range append(blocks, strings.Replace(blocks[0], "6379/0", "6379/zero", 1)) {
		path := filepath.Join(dir, "dests.toml")
		if err := os.WriteFile(path, []byte(block), 0o600); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := runCLI(t, nil, "--check", "dispatch", "--config", path)
		if bad := i == len(blocks); bad {
			if code == 0 || !strings.Contains(errOut, "invalid database number") || strings.Contains(errOut, "redis://:password@") {
				t.Errorf("a bad redis_url: exit %d, stderr %q; want it refused, no password shown", code, errOut)
			}
			continue
		}
		if code != 0 || out != "" || errOut != "" {
			t.Errorf("the example\n%s\nis refused: exit %d, stdout %q, stderr %q", block, code, out, errOut)
		}
	}
}
