//go:build !linux

package chaos

import "os/exec"

// dieWithParent does nothing where the kernel cannot kill a child with its
// parent: a relay may then outlive an interrupted run.
func dieWithParent(*exec.Cmd) {}
