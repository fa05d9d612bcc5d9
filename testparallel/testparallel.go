// Package testparallel is how a test package's TestMain runs more
// parallel tests at once than Go's default (GOMAXPROCS), for tests that
// spend their time waiting on a server, a timeout or a clock rather than
// on the CPU.
package testparallel

import (
	"flag"
	"os"
	"runtime"
	"strconv"
	"testing"
)

// Default sets -test.parallel to perCPU times GOMAXPROCS, unless the
// command line gave -test.parallel. It is called after flag.Parse.
func Default(perCPU int) {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", strconv.Itoa(perCPU*runtime.GOMAXPROCS(0)))
	}
}

// Main is a TestMain that runs perCPU times GOMAXPROCS parallel tests at
// once (see Default) and exits with the tests' code.
func Main(m *testing.M, perCPU int) {
	flag.Parse()
	Default(perCPU)
	os.Exit(m.Run())
}
