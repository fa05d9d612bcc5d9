package postgres_test

import (
	"testing"

	"inbox/testparallel"
)

// TestMain lets twice the CPUs run the parallel tests (the store suite's
// groups and most of this package's tests) at once unless -parallel is
// given: each has a schema of its own and spends its time waiting on the
// server, not on the CPU.
func TestMain(m *testing.M) { testparallel.Main(m, 2) }
