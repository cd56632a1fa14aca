//go:build !linux

package transport

// Run does nothing where mcpd does not reap orphans (it runs as PID 1 only
// in Linux containers).
func (r *Reaper) Run() (stop func()) { return func() {} }
