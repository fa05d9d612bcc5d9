package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"inbox/bench/internal/inboxmod"
)

// dispatchRoundTimeout bounds one round of one -dispatch run: its ingest
// and its drain of -dispatch-rows rows.
const dispatchRoundTimeout = 10 * time.Minute

// parseWorkers reads -dispatch: worker counts, comma-separated, each once.
func parseWorkers(list string) ([]int, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	var workers []int
	for f := range strings.SplitSeq(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 1024 {
			return nil, fmt.Errorf("-dispatch %q: want worker counts from 1 to 1024, comma-separated (e.g. 4,32)", list)
		}
		if slices.Contains(workers, n) {
			return nil, fmt.Errorf("-dispatch %q: %d listed twice", list, n)
		}
		workers = append(workers, n)
	}
	return workers, nil
}

// dispatchArgs is the command line of one -dispatch run.
func dispatchArgs(cfg config, workers int) []string {
	return []string{"-n", strconv.Itoa(cfg.dispatchN), "-conns", strconv.Itoa(cfg.conns),
		"-workers", strconv.Itoa(workers), "-rounds", strconv.Itoa(cfg.rounds), "-jetstream=false"}
}

// runDispatch measures the dispatcher at each -dispatch worker count with
// ./bench/dispatch, built from the module, and prints what it prints under
// the receivers' report, with the load average as each run started and
// ended. Its ingest rate is measured in the same run as its drain, so the
// two are side by side.
func runDispatch(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	if len(cfg.dispatch) == 0 {
		return nil
	}
	root, err := inboxmod.Dir(ctx)
	if err != nil {
		return fmt.Errorf("-dispatch: %w", err)
	}
	dir, err := os.MkdirTemp("", "inbox-bench-dispatch-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "dispatch-bench")
	build, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(build, "go", "build", "-o", bin, "./dispatch")
	cmd.Dir = filepath.Join(root, "bench") // the bench module, which replaces inbox with root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build bench/dispatch: %w\n%s", err, out)
	}
	for _, workers := range cfg.dispatch {
		args := dispatchArgs(cfg, workers)
		fmt.Fprintf(stderr, "bench: dispatch at %d workers, %d rounds\n", workers, cfg.rounds)
		run, cancel := context.WithTimeout(ctx, time.Duration(cfg.rounds)*dispatchRoundTimeout)
		cmd := exec.CommandContext(run, bin, args...)
		cmd.Dir = root // it finds schema.sql through the Go command from there
		cmd.Stderr = stderr
		before := loadAvg()
		out, err := cmd.Output()
		after := loadAvg()
		cancel()
		if err != nil {
			return fmt.Errorf("dispatch at %d workers: %w", workers, err)
		}
		fmt.Fprintf(stdout, "\ndispatch at --workers %d (go -C bench run ./dispatch %s), load avg %s -> %s:\n",
			workers, strings.Join(args, " "), before, after)
		for line := range strings.Lines(string(out)) {
			fmt.Fprintf(stdout, "  %s", line)
		}
	}
	return nil
}
