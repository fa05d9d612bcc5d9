package nats_test

import (
	"testing"

	"inbox/testparallel"
)

// TestMain lets four times the CPUs run the parallel tests at once unless
// -parallel is given: each has a nats-server of its own and spends nearly
// all its time waiting on it (pings, reconnects, lookups once a second),
// so that the slowest, TestStalledLinkPauses, runs beside the others rather
// than after them.
func TestMain(m *testing.M) { testparallel.Main(m, 4) }
