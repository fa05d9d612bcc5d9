package main

import (
	"io"
	"slices"
	"strings"
	"testing"
)

func TestParseFlagsRepeat(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		repeat  float64
		allNew  bool
		wantErr string
	}{
		{args: nil, repeat: 0.1}, // the usual mix, no extra run
		{args: []string{"-repeat", "0.5"}, repeat: 0.5, allNew: true},
		{args: []string{"-repeat=0.1"}, repeat: 0.1, allNew: true}, // given: compared with all new
		{args: []string{"-repeat", "0"}, repeat: 0},                // all new already
		{args: []string{"-repeat", "1"}, wantErr: "-repeat 1"},
		{args: []string{"-repeat", "-0.1"}, wantErr: "-repeat -0.1"},
		{args: []string{"-repeat", "NaN"}, wantErr: "-repeat NaN"},
		{args: []string{"-repeat", "half"}, wantErr: "invalid value"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cfg, ok := parseCase(t, tc.args, tc.wantErr)
			if !ok {
				return
			}
			if cfg.repeat != tc.repeat || cfg.allNew != tc.allNew {
				t.Errorf("repeat %v, allNew %v, want %v, %v", cfg.repeat, cfg.allNew, tc.repeat, tc.allNew)
			}
		})
	}
}

func TestParseFlagsPin(t *testing.T) {
	cfg, err := parseFlags([]string{"-pin"}, io.Discard)
	if err != nil || !cfg.pin {
		t.Errorf("-pin: pin %v, err %v", cfg.pin, err)
	}
	if cfg, _ := parseFlags(nil, io.Discard); cfg.pin {
		t.Error("pinned without -pin")
	}
}

// TestReceiverSpecsAllNew: with -repeat, inbox-all-new runs right after
// inbox, with no repeats; the others run at the share given.
func TestReceiverSpecsAllNew(t *testing.T) {
	cfg, err := parseFlags([]string{"-repeat", "0.5", "-order", "store-nothing,commit-each"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	specs, err := receiverSpecs(t.Context(), &cfg, t.TempDir(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range specs {
		got = append(got, s.name)
		if s.repeat != 0.5 {
			t.Errorf("%s at %v repeats, want 0.5", s.name, s.repeat)
		}
	}
	// Without inbox there is nothing to run all new.
	if strings.Join(got, ",") != "store-nothing,commit-each" || runsPerRound(cfg) != 2 {
		t.Errorf("runs %v, %d a round, want store-nothing,commit-each", got, runsPerRound(cfg))
	}
	cfg.receivers = []string{storeNothing, nameInbox}
	if n := runsPerRound(cfg); n != 3 {
		t.Errorf("with inbox, %d runs a round, want 3 (inbox-all-new too)", n)
	}
}

func TestParseFlagsPrefill(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		env     string
		want    int64
		wantErr string
	}{
		{want: 0},
		{args: []string{"-prefill", "5000000"}, want: 5_000_000},
		{env: "1000", want: 1000},
		{args: []string{"-prefill", "7"}, env: "junk", want: 7}, // the flag wins
		{env: "junk", wantErr: "INBOX_BENCH_PREFILL"},
		{args: []string{"-prefill", "-1"}, wantErr: "-prefill -1"},
		{args: []string{"-prefill", "60000000"}, wantErr: "-prefill 60000000"},
	} {
		t.Run(strings.Join(tc.args, " ")+" env="+tc.env, func(t *testing.T) {
			t.Setenv("INBOX_BENCH_PREFILL", tc.env)
			cfg, ok := parseCase(t, tc.args, tc.wantErr)
			if !ok {
				return
			}
			if cfg.prefill != tc.want {
				t.Errorf("prefill %d, want %d", cfg.prefill, tc.want)
			}
		})
	}
}

func TestParseFlagsDispatch(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    []int
		wantErr string
	}{
		{args: nil},
		{args: []string{"-dispatch", "4,32"}, want: []int{4, 32}},
		{args: []string{"-dispatch", " 32 "}, want: []int{32}},
		{args: []string{"-dispatch", "0"}, wantErr: "-dispatch"},
		{args: []string{"-dispatch", "4,,32"}, wantErr: "-dispatch"},
		{args: []string{"-dispatch", "4,4"}, wantErr: "listed twice"},
		{args: []string{"-dispatch", "32", "-dispatch-rows", "0"}, wantErr: "-dispatch-rows 0"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cfg, ok := parseCase(t, tc.args, tc.wantErr)
			if !ok {
				return
			}
			if !slices.Equal(cfg.dispatch, tc.want) {
				t.Errorf("dispatch %v, want %v", cfg.dispatch, tc.want)
			}
		})
	}
	cfg, err := parseFlags([]string{"-dispatch", "32", "-rounds", "3", "-conns", "16"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(dispatchArgs(cfg, 32), " "), "-n 20000 -conns 16 -workers 32 -rounds 3 -jetstream=false"; got != want {
		t.Errorf("dispatch command line %q, want %q", got, want)
	}
}

// parseCase parses args as the command line and checks its error against
// wantErr: one containing it when given, none otherwise. ok says whether
// the flags parsed, so the case goes on to check cfg.
func parseCase(t *testing.T, args []string, wantErr string) (cfg config, ok bool) {
	t.Helper()
	cfg, err := parseFlags(args, io.Discard)
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("err %v, want one with %q", err, wantErr)
		}
		return config{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return cfg, true
}
