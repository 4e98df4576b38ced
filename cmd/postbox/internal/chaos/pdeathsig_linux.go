package chaos

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill cmd's process when the suite's own
// process dies, so that no relay outlives an interrupted run.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
