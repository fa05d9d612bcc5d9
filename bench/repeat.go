package main

import "math"

// repeatSchedule says which of a sender's deliveries repeat a job it has
// already sent (the same bytes, signed afresh, as a provider retries), so
// that a share of them, spread evenly, are repeats: delivery n (from 0) is
// one when floor((n+1)·share) > floor(n·share). Share 0.1 repeats every
// tenth delivery, 0.5 every second one; delivery 0 is never a repeat, so
// there is always a job to repeat.
type repeatSchedule struct {
	ppm int64 // the share in parts per million, so the pattern is exact
}

func newRepeatSchedule(share float64) repeatSchedule {
	return repeatSchedule{ppm: int64(math.Round(share * 1e6))}
}

// at reports whether delivery n is a repeat.
func (r repeatSchedule) at(n int) bool {
	return (int64(n)+1)*r.ppm/1e6 > int64(n)*r.ppm/1e6
}
