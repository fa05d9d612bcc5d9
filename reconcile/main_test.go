package reconcile_test

import (
	"testing"

	"inbox/testparallel"
)

// TestMain lets twice the CPUs run the parallel tests at once unless
// -parallel is given: each has a store and API of its own and spends its
// time waiting on the rate limit and Retry-After.
func TestMain(m *testing.M) { testparallel.Main(m, 2) }
