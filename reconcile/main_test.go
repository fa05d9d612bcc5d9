package reconcile_test

import (
	"flag"
	"os"
	"runtime"
	"strconv"
	"testing"
)

// TestMain lets twice the CPUs run the parallel tests at once unless
// -parallel is given: each has a store and API of its own and spends its
// time waiting on the rate limit and Retry-After.
func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", strconv.Itoa(2*runtime.GOMAXPROCS(0)))
	}
	os.Exit(m.Run())
}
