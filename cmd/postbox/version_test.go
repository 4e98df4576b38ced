package main_test

import (
	"runtime"
	"strings"
	"testing"
)

// postbox version prints the module's version and the Go it was built
// with, and postbox --version the same. (The commit it was built from is
// checked by TestDeployDockerBuildIsStaticAndRuns, which builds from a
// clone: the test binary is built in a worktree, where Go records no VCS
// information.)
func TestVersionCommandAndFlag(t *testing.T) {
	version := runOK(t, "version")
	if !strings.HasPrefix(version, "postbox ") || !strings.Contains(version, runtime.Version()) {
		t.Errorf("postbox version = %q, want postbox, the module version and %s", version, runtime.Version())
	}
	if flag := runOK(t, "--version"); flag != version {
		t.Errorf("postbox --version = %q, want the same as postbox version, %q", flag, version)
	}
}
