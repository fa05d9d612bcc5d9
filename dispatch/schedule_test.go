package dispatch_test

import (
	"slices"
	"testing"
	"time"

	"inbox/dispatch"
)

func TestParseSchedule(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][]time.Duration{
		"1s,5s,30s,5m": dispatch.DefaultSchedule(),
		" 100ms , 2h ": {100 * time.Millisecond, 2 * time.Hour},
		"none":         {},
		"0s":           {0},
	} {
		got, err := dispatch.ParseSchedule(in)
		if err != nil || !slices.Equal(got, want) || got == nil {
			t.Errorf("ParseSchedule(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "1s,,5s", "-1s", "5", "1s,forever", "200h"} {
		if got, err := dispatch.ParseSchedule(in); err == nil {
			t.Errorf("ParseSchedule(%q) = %v, want an error", in, got)
		}
	}
}

// TestDefaultScheduleIsACopy: changing the schedule one caller got changes
// nothing for the next.
func TestDefaultScheduleIsACopy(t *testing.T) {
	t.Parallel()
	got := dispatch.DefaultSchedule()
	got[0] = time.Hour
	if again := dispatch.DefaultSchedule(); again[0] != time.Second {
		t.Errorf("DefaultSchedule()[0] = %s after a caller changed its copy", again[0])
	}
}
