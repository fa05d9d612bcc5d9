package main

import (
	"reflect"

	"github.com/urfave/cli/v2"
)

// The headings serve's and dispatch's --help group their flags under; the
// help lists them in this order's alphabetical one, as urfave/cli does.
const (
	catListening    = "Listening"
	catSources      = "Sources and secrets"
	catStore        = "Store"
	catLimits       = "Limits"
	catDestinations = "Destinations"
	catDispatch     = "Dispatch"
	catPolling      = "Polling Sume"
	catLogging      = "Logging and help"
)

// inCategory returns flags, each put under the heading name in --help.
// It panics on a flag that has no Category field: every flag urfave/cli
// makes has one.
func inCategory(name string, flags ...cli.Flag) []cli.Flag {
	for _, f := range flags {
		reflect.ValueOf(f).Elem().FieldByName("Category").SetString(name)
	}
	return flags
}

// helpFlag is --help (-h) of a command whose flags are grouped: urfave/cli's
// own has no heading, and would sit alone above the groups. A command that
// takes it sets HideHelp, so urfave/cli adds no other.
func helpFlag() cli.Flag {
	return &cli.BoolFlag{Name: "help", Aliases: []string{"h"}, Usage: "show help", DisableDefaultText: true, Category: catLogging}
}
