package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

// versionLine names the version, the commit, its time and a modified tree,
// and says "unknown" without build info.
func TestVersionLine(t *testing.T) {
	info := &debug.BuildInfo{Main: debug.Module{Path: "github.com/postbox-go/postbox", Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.time", Value: "2026-12-01T14:00:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}}
	want := "postbox v1.2.3 (commit 0123456789abcdef0123456789abcdef01234567, 2026-12-01T14:00:00Z, modified) go"
	if got := versionLine(info); !strings.HasPrefix(got, want) {
		t.Errorf("versionLine = %q, want it to begin with %q", got, want)
	}
	if got := versionLine(nil); !strings.HasPrefix(got, "postbox unknown go") {
		t.Errorf("versionLine(nil) = %q, want postbox unknown", got)
	}
}
