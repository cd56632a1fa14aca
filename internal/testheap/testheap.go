// Package testheap counts, for tests, the objects still in use by the call
// stack that allocated them: the proof that something is not kept (a
// cache entry, a map per URI) is that no object its code allocated is in
// use once the work is done.
package testheap

import (
	"runtime"
	"testing"
)

// Record has every allocation recorded from now until the test ends (a
// memory profile rate of 1), so that InUse sees all of them.
func Record(t testing.TB) {
	t.Helper()
	rate := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	t.Cleanup(func() { runtime.MemProfileRate = rate })
}

// InUse counts the objects in use, as of a fresh collection, that were
// allocated by a stack match accepts: the function names of the stack,
// innermost first (runtime.newobject, then its caller, ...).
func InUse(match func(stack []string) bool) int64 {
	// The profile lags up to two collections behind.
	for range 3 {
		runtime.GC()
	}
	var records []runtime.MemProfileRecord
	for n := 64; ; n *= 2 {
		records = make([]runtime.MemProfileRecord, n)
		got, ok := runtime.MemProfile(records, true)
		if ok {
			records = records[:got]
			break
		}
	}
	var objects int64
	for _, r := range records {
		var stack []string
		frames := runtime.CallersFrames(r.Stack())
		for {
			f, more := frames.Next()
			stack = append(stack, f.Function)
			if !more {
				break
			}
		}
		if match(stack) {
			objects += r.InUseObjects()
		}
	}
	return objects
}
