package receiver

import (
	"testing"

	"inbox/testparallel"
)

// TestMain lets twice the CPUs run the parallel tests at once unless
// -parallel is given: each has a store and server of its own and spends
// most of its time waiting on a slow client or a timeout. The tests that
// measure memory or time closely stay serial: Go runs them before these.
func TestMain(m *testing.M) { testparallel.Main(m, 2) }
