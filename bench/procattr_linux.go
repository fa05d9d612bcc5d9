package main

import "syscall"

// dieWithParent has the kernel kill the child when the bench exits, however
// it exits, so no receiver is left running.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
