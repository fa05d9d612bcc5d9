package nats_test

import (
	"flag"
	"os"
	"runtime"
	"strconv"
	"testing"
)

// TestMain lets four times the CPUs run the parallel tests at once unless
// -parallel is given: each has a nats-server of its own and spends nearly
// all its time waiting on it (pings, reconnects, lookups once a second),
// so that the slowest, TestStalledLinkPauses, runs beside the others rather
// than after them.
func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", strconv.Itoa(4*runtime.GOMAXPROCS(0)))
	}
	os.Exit(m.Run())
}
