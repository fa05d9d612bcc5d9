package dispatch

import (
	"fmt"
	"strings"
	"time"
)

// DefaultSchedule returns how long to wait before each retry: after the
// first failed attempt 1s, then 5s, 30s and 5m; a fifth failure parks the
// row. The slice is the caller's to change.
func DefaultSchedule() []time.Duration {
	return []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 5 * time.Minute}
}

// maxDelay bounds one wait of a schedule.
const maxDelay = 7 * 24 * time.Hour

// ParseSchedule reads a retry schedule: comma-separated Go durations
// ("1s,5s,30s,5m"), each the wait before one more attempt, or "none" for no
// retries (the first failure parks the row). It fails on an empty list, an
// unreadable or a negative duration, or one longer than a week.
func ParseSchedule(s string) ([]time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "none" {
		return []time.Duration{}, nil
	}
	if s == "" {
		return nil, fmt.Errorf("retry schedule is empty: give durations such as 1s,5s,30s,5m, or none")
	}
	var out []time.Duration
	for _, part := range strings.Split(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(part))
		if err != nil || d < 0 || d > maxDelay {
			return nil, fmt.Errorf("retry schedule %q: %q is not a duration from 0s to 168h", s, strings.TrimSpace(part))
		}
		out = append(out, d)
	}
	return out, nil
}

// FormatSchedule writes s as ParseSchedule reads it: "none" for no
// retries.
func FormatSchedule(s []time.Duration) string {
	if len(s) == 0 {
		return "none"
	}
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = d.String()
	}
	return strings.Join(parts, ",")
}
