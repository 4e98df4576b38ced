package main

import (
	"flag"
	"fmt"
	"strings"
	"time"
)

// positive refuses each named flag of fs whose value is zero or negative:
// a library would take a zero for "the default" (--lease 0s would run with
// 30s) and report a negative by its Go field name. Use notNegative for a
// flag whose zero has a meaning its help gives.
func positive(fs *flag.FlagSet, names ...string) error {
	return checkSign(fs, names, func(sign int) bool { return sign > 0 }, "want a value above zero")
}

// notNegative refuses each named flag of fs whose value is negative.
func notNegative(fs *flag.FlagSet, names ...string) error {
	return checkSign(fs, names, func(sign int) bool { return sign >= 0 }, "must not be negative")
}

// checkSign refuses the first named flag whose value's sign ok does not
// accept, naming the flag. A flag that is not an int, a float or a
// duration is a programming error.
func checkSign(fs *flag.FlagSet, names []string, ok func(sign int) bool, want string) error {
	for _, name := range names {
		f := fs.Lookup(name)
		if f == nil {
			panic("postbox: no flag --" + name)
		}
		if !ok(sign(f.Value.(flag.Getter).Get())) {
			return fmt.Errorf("%w: --%s %s: %s", errUsage, name, f.Value, want)
		}
	}
	return nil
}

// sign is -1, 0 or 1 as v, a flag's value, is below, at or above zero.
func sign(v any) int {
	var x float64
	switch n := v.(type) {
	case int:
		x = float64(n)
	case int64:
		x = float64(n)
	case float64:
		x = n
	case time.Duration:
		x = float64(n)
	default:
		panic(fmt.Sprintf("postbox: flag value %T is not a number", v))
	}
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}

// withFlagNames rewrites the Go field names of a library's configuration
// error (relay: Config.Lease 50ms is shorter than 100ms) as the flags that
// set them, fields maps each field to its flag.
func withFlagNames(err error, fields map[string]string) error {
	msg := err.Error()
	for field, name := range fields {
		msg = strings.ReplaceAll(msg, "Config."+field, "--"+name)
		msg = strings.ReplaceAll(msg, "below "+field, "below --"+name)
	}
	return fmt.Errorf("%w: %s", errUsage, msg)
}
