//go:build !linux

package main

import "syscall"

// dieWithParent has no equivalent here: children are stopped by the bench's
// own deferred cleanup only.
func dieWithParent() *syscall.SysProcAttr { return nil }
