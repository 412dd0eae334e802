//go:build !linux

package run

import "os/exec"

// dieWithParent is Linux-only; elsewhere Close is what stops the emulators.
func dieWithParent(*exec.Cmd) {}
