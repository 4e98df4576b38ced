package main

import (
	"context"
	"errors"
	"flag"
)

// setupEndpointsApply is postbox endpoints apply (package endpoint/manifest).
func setupEndpointsApply(fs *flag.FlagSet) func(context.Context) error {
	return func(context.Context) error { return errors.New("endpoints apply: not written yet") }
}
