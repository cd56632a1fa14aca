//go:build !linux

package main

import "os/exec"

// dieWithBench does nothing where the kernel cannot signal a child when its
// parent dies; the bench still stops its children on every normal exit.
func dieWithBench(*exec.Cmd) {}
