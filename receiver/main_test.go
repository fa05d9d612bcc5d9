package receiver

import (
	"flag"
	"os"
	"runtime"
	"strconv"
	"testing"
)

// TestMain lets twice the CPUs run the parallel tests at once unless
// -parallel is given: each has a store and server of its own and spends
// most of its time waiting on a slow client or a timeout. The tests that
// measure memory or time closely stay serial: Go runs them before these.
func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", strconv.Itoa(2*runtime.GOMAXPROCS(0)))
	}
	os.Exit(m.Run())
}
