package dispatch_test

import (
	"testing"

	"inbox/testparallel"
)

// TestMain lets twice the CPUs run the parallel tests at once unless
// -parallel is given: each has a store, destination and clock of its own
// and spends most of its time waiting for a poll, a probe or a timeout,
// not on the CPU. Tests that set the environment, or check what was done
// within a few hundred milliseconds, stay serial: Go runs them first.
func TestMain(m *testing.M) { testparallel.Main(m, 2) }
