package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
)

// setupVersion is "postbox version" (also "postbox --version"): the
// module's version and the commit it was built from.
func setupVersion(fs *flag.FlagSet) func(context.Context) error {
	return func(context.Context) error {
		info, _ := debug.ReadBuildInfo()
		fmt.Fprintln(os.Stdout, versionLine(info))
		return nil
	}
}

// versionLine describes the build info: "postbox VERSION (commit REV,
// TIME[, modified]) GO OS/ARCH". A build without VCS information (go
// install of a module, -buildvcs=false) has no commit; one without build
// info at all says "unknown".
func versionLine(info *debug.BuildInfo) string {
	version := "unknown"
	if info != nil && info.Main.Version != "" {
		version = info.Main.Version
	}
	var vcs []string
	if info != nil {
		settings := map[string]string{}
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
		if rev := settings["vcs.revision"]; rev != "" {
			vcs = append(vcs, "commit "+rev)
		}
		if t := settings["vcs.time"]; t != "" {
			vcs = append(vcs, t)
		}
		if settings["vcs.modified"] == "true" {
			vcs = append(vcs, "modified")
		}
	}
	line := "postbox " + version
	if len(vcs) > 0 {
		line += " (" + strings.Join(vcs, ", ") + ")"
	}
	return line + " " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
}
