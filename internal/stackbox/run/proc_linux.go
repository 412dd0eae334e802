package run

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the emulator die with the test process, even when it is killed (a test
// timeout) before Close runs.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
