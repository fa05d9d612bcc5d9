package config

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

// Duration is the value of a duration flag (see DurationFlag): the text as
// the operator typed it, on the command line or in the variable, and the
// duration it reads as, parsed once when the flag is set. Every error about
// the flag quotes the text, not the duration it became: --busy-timeout
// "0.5ms", not 500µs.
type Duration struct {
	name string
	text string
	d    time.Duration
	err  error // why text does not read as a duration; nil when it does
}

// Set takes the text given for the flag. A text that does not parse is
// refused when the flag's action runs, in the form every other refusal
// has, so Set itself never fails.
func (v *Duration) Set(text string) error {
	v.text = text
	v.d, v.err = time.ParseDuration(strings.TrimSpace(text))
	return nil
}

// String returns the text as typed; unset, the default as --help shows it.
func (v *Duration) String() string { return v.text }

// Get returns the duration.
func (v *Duration) Get() time.Duration { return v.d }

// Errorf returns an error about the flag's value: --name "text": then
// format's text.
func (v *Duration) Errorf(format string, a ...any) error {
	return fmt.Errorf("--%s %q: %s", v.name, v.text, fmt.Sprintf(format, a...))
}

// DurationFlag returns --name, with the variable env and the default def,
// whose value is a *Duration (read it with DurationOf). A value given that
// does not parse as a duration, or that check refuses (check may be nil),
// stops the command before it runs, with an error that quotes it as typed.
// --help shows def as a duration flag of urfave/cli does.
func DurationFlag(name string, def time.Duration, usage, env string, check func(time.Duration) error) *cli.GenericFlag {
	return &cli.GenericFlag{
		Name:    name,
		Value:   &Duration{name: name, text: def.String(), d: def},
		Usage:   usage,
		EnvVars: []string{env},
		Action: func(_ *cli.Context, val any) error {
			v := val.(*Duration)
			if v.err != nil {
				return v.Errorf("want a duration such as 500ms, 3s or 1m")
			}
			if check == nil {
				return nil
			}
			if err := check(v.d); err != nil {
				return v.Errorf("%s", err)
			}
			return nil
		},
	}
}

// DurationOf returns the value of c's duration flag name.
func DurationOf(c *cli.Context, name string) *Duration {
	v, ok := c.Generic(name).(*Duration)
	if !ok {
		panic("config: --" + name + " is not a DurationFlag")
	}
	return v
}

// Positive refuses zero and negative durations.
func Positive(d time.Duration) error {
	if d <= 0 {
		return errors.New("want a positive duration")
	}
	return nil
}

// NotNegative refuses negative durations.
func NotNegative(d time.Duration) error {
	if d < 0 {
		return errors.New("want 0 or more")
	}
	return nil
}
