//go:build !linux

package transport

import (
	"os"
	"syscall"
)

// setParentDeathSignal does nothing here: only Linux offers a parent-death
// signal. A child outlives a daemon that dies without stopping it.
func setParentDeathSignal(*syscall.SysProcAttr) {}

// pendingBytes is how many bytes wait in the pipe f reads from; here it
// cannot tell, and says 0.
func pendingBytes(*os.File) int { return 0 }
