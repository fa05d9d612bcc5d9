package main

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"inbox/inbox"
	"inbox/process"
)

// parseServeArgs parses serve's flags as the binary does, without running
// it.
func parseServeArgs(t *testing.T, args ...string) (process.Config, error) {
	t.Helper()
	cmd := serveCommand(io.Discard)
	var cfg process.Config
	var perr error
	cmd.Action = func(c *cli.Context) error {
		cfg, perr = parseServe(c, io.Discard)
		return nil
	}
	app := &cli.App{Name: "inbox", Commands: []*cli.Command{cmd}, Writer: io.Discard, ErrWriter: io.Discard,
		ExitErrHandler: func(*cli.Context, error) {}}
	if err := app.Run(append([]string{"inbox", "serve"}, args...)); err != nil {
		return process.Config{}, err // a flag refused before the action
	}
	return cfg, perr
}

func TestParseServeDefaults(t *testing.T) {
	t.Setenv("SUME_COM_WEBHOOK_SIGNING_SECRET", "old,new")
	cfg, err := parseServeArgs(t)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DB != "inbox.db" || cfg.Addr != "127.0.0.1:8080" || cfg.AdminAddr != "" || cfg.Log.GetLevel() != zerolog.InfoLevel {
		t.Errorf("db %q addr %q admin %q log %s", cfg.DB, cfg.Addr, cfg.AdminAddr, cfg.Log.GetLevel())
	}
	if cfg.Reconcile.Loop.WriteTimeout != inbox.DefaultBusyTimeout+lastWriteMargin || cfg.MaxInFlight != 512 || cfg.BodyTimeout != 2*time.Second || cfg.BodyMemory != 64<<20 {
		t.Errorf("last write %s in flight %d body timeout %s body memory %d", cfg.Reconcile.Loop.WriteTimeout, cfg.MaxInFlight, cfg.BodyTimeout, cfg.BodyMemory)
	}
	if cfg.Limits.ReadTimeout != 8*time.Second || cfg.Limits.WriteTimeout != 9*time.Second {
		t.Errorf("limits %+v", cfg.Limits)
	}
	if cfg.Destinations != nil || cfg.Reconcile.API != nil {
		t.Errorf("destinations %+v, api %v: want neither without their flags", cfg.Destinations, cfg.Reconcile.API)
	}
	if len(cfg.Sources) != 1 {
		t.Fatalf("sources %+v, want the one Sume source", cfg.Sources)
	}
	src := cfg.Sources[0]
	if src.Name != inbox.DefaultSource || src.Path != "/webhooks/sume" || src.Accepted != http.StatusNoContent ||
		len(src.Keys) != 2 || src.HardCap != 4<<20 || src.Rules.MaxBody != 1<<20 || src.Rules.Kind != inbox.KindBody {
		t.Errorf("source %+v", src)
	}
}

func TestParseServeDestination(t *testing.T) {
	t.Setenv("SUME_COM_WEBHOOK_SIGNING_SECRET", "s")
	cfg, err := parseServeArgs(t, "--forward-url", "http://127.0.0.1:3000/jobs", "--workers", "3", "--retry-schedule", "1s,2s", "--max-slow", "0")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Destinations) != 1 || cfg.Destinations[0].Name != "default" {
		t.Fatalf("destinations %+v, want one destination, default", cfg.Destinations)
	}
	d := cfg.Destinations[0]
	if d.URL != "http://127.0.0.1:3000/jobs" || d.Workers != 3 || len(d.Schedule()) != 2 || d.MaxSlow == nil || *d.MaxSlow != 0 {
		t.Errorf("destination %+v", d)
	}
}

// TestParseServeRefuses checks that every setting serve cannot run with is
// refused by parsing, before anything is bound or opened, naming the flag.
func TestParseServeRefuses(t *testing.T) {
	tests := []struct {
		env  string // the signing secret; "" leaves it unset
		args []string
		want string
	}{
		{"", nil, "no signing secret"},
		{"replace-with-the-signing-secret", nil, "placeholder"},
		{"s", []string{"extra"}, "takes no arguments"},
		{"s", []string{"--log-level", "loud"}, "--log-level"},
		{"s", []string{"--max-request", "0"}, "--max-request"},
		{"s", []string{"--path", "webhooks"}, "--path"},
		{"s", []string{"--path", "/readyz"}, "would hide a probe"},
		{"s", []string{"--read-header-timeout", "9s", "--read-timeout", "8s"}, "--read-header-timeout"},
		{"s", []string{"--body-timeout", "0s"}, "--body-timeout"},
		{"s", []string{"--max-in-flight", "0"}, "--max-in-flight"},
		{"s", []string{"--busy-timeout", "9s"}, "--busy-timeout"},
		{"s", []string{"--busy-timeout", "1ns"}, "at least 1ms"},
		{"s", []string{"--busy-timeout", "-1s"}, "at least 1ms"},
		{"s", []string{"--max-body-memory", "4MiB"}, "--max-body-memory"},
		{"s", []string{"--poll-every", "0s"}, "--poll-every"},
		{"s", []string{"--forward-url", "http://127.0.0.1:1/", "--exec", "cat"}, "one destination only"},
		{"s", []string{"--nats-url", "nats://127.0.0.1:1"}, "go together"},
		{"s", []string{"--forward-secret", "whsec_x"}, "no destination"},
		{"s", []string{"--forward-url", "http://127.0.0.1:1/", "--retry-schedule", "soon"}, "--retry-schedule"},
		{"s", []string{"--forward-url", "http://127.0.0.1:1/", "--max-slow", "-1"}, "--max-slow"},
	}
	for _, tt := range tests {
		if tt.env != "" {
			t.Setenv("SUME_COM_WEBHOOK_SIGNING_SECRET", tt.env)
		} else {
			t.Setenv("SUME_COM_WEBHOOK_SIGNING_SECRET", "")
			os.Unsetenv("SUME_COM_WEBHOOK_SIGNING_SECRET") // t.Setenv restores it
		}
		_, err := parseServeArgs(t, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("serve %v: %v, want an error saying %q", tt.args, err, tt.want)
		}
	}
}
