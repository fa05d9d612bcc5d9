// Package inboxmod finds the inbox module the benchmarks measure: bench/ is
// a module of its own, which requires inbox and replaces it with the folder
// above, so the binary built and the schema read are the working tree's.
package inboxmod

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Dir returns the folder of the inbox module as the Go command resolves it
// from the current folder: the bench module's replacement, or the main
// module when run from inbox's own folder. It fails outside both, or when
// the folder it names is not the inbox module.
func Dir(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "inbox").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, bytes.TrimSpace(ee.Stderr))
		}
		return "", fmt.Errorf("go list -m inbox (run from bench/ or the inbox module): %w", err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", errors.New("go list -m inbox: no folder: run from bench/ or the inbox module")
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", err
	}
	if !slices.Contains(strings.Split(string(mod), "\n"), "module inbox") {
		return "", fmt.Errorf("%s is not the inbox module", dir)
	}
	return dir, nil
}

// Schema returns the inbox module's schema.sql, the one inbox serve applies.
func Schema(ctx context.Context) ([]byte, error) {
	dir, err := Dir(ctx)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(filepath.Join(dir, "schema.sql"))
}
