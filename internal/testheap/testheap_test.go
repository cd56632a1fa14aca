package testheap

import (
	"runtime"
	"slices"
	"testing"
)

var kept []*[64]byte

//go:noinline
func allocate(n int) {
	for range n {
		kept = append(kept, new([64]byte))
	}
}

// TestInUse counts what allocate keeps, and nothing once it is let go.
func TestInUse(t *testing.T) {
	Record(t)
	const fn = "github.com/mcpd-project/mcpd/internal/testheap.allocate"
	byAllocate := func(stack []string) bool { return slices.Contains(stack, fn) }
	allocate(10)
	if got := InUse(byAllocate); got < 10 {
		t.Errorf("with 10 objects kept: got %d in use, want at least 10", got)
	}
	kept = nil
	if got := InUse(byAllocate); got != 0 {
		t.Errorf("with none kept: got %d in use, want 0", got)
	}
	runtime.KeepAlive(kept)
}
