package main

import (
	"math"
	"testing"
)

func TestRepeatSchedule(t *testing.T) {
	const n = 10_000
	for _, share := range []float64{0, 0.1, 0.25, 1.0 / 3, 0.5, 0.9, 0.999} {
		r := newRepeatSchedule(share)
		repeats, run, longest := 0, 0, 0
		for i := range n {
			if !r.at(i) {
				run = 0
				continue
			}
			if i == 0 {
				t.Errorf("share %v: delivery 0 is a repeat, with nothing sent before it", share)
			}
			repeats++
			run++
			longest = max(longest, run)
		}
		if want := share * n; math.Abs(float64(repeats)-want) > 1 {
			t.Errorf("share %v: %d repeats in %d, want %.0f", share, repeats, n, want)
		}
		// Spread evenly: no longer run of repeats than the share forces.
		if share > 0 {
			if most := int(math.Ceil(share / (1 - share))); longest > most {
				t.Errorf("share %v: %d repeats in a row, want at most %d", share, longest, most)
			}
		}
	}

	// The load before -repeat: the tenth of every ten, and -repeat 0.5 every
	// second one.
	tenth, half := newRepeatSchedule(0.1), newRepeatSchedule(0.5)
	for i := range 1000 {
		if got, want := tenth.at(i), i%10 == 9; got != want {
			t.Fatalf("share 0.1: delivery %d repeat %v, want %v", i, got, want)
		}
		if got, want := half.at(i), i%2 == 1; got != want {
			t.Fatalf("share 0.5: delivery %d repeat %v, want %v", i, got, want)
		}
	}
}
