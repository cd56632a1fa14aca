package transport

import (
	"sync"

	"github.com/rs/zerolog"
)

// Reaper reaps the orphaned processes the kernel hands to mcpd when mcpd
// runs as PID 1 (a container without an init, a Kubernetes container):
// the init process inherits every orphan, and one that never waits for
// them collects a zombie for each. A server run through a wrapper (npx,
// uvx, sh -c) leaves its own children to the init process when the
// wrapper dies before them, and a stop that kills a server's process
// group kills the wrapper and its children together.
//
// It never reaps a child that a Process started (see ProcessOptions.Reaper):
// that one stays its Process's to wait for, with its exit status.
//
// A nil *Reaper reaps nothing. Its methods may be called concurrently.
type Reaper struct {
	log zerolog.Logger
	// starting is held for reading while a Process starts its child and
	// for writing while orphans are reaped, so that a child that exits at
	// once is never taken for an orphan before its pid is known.
	starting sync.RWMutex

	mu sync.Mutex
	// own counts the Processes' children of each pid until released: a
	// pid freed by one's reap may be another's before the first releases.
	own map[int]int
}

// NewReaper returns a Reaper that logs each orphan it reaps at debug level.
// It reaps once Run is called.
func NewReaper(log zerolog.Logger) *Reaper {
	return &Reaper{log: log, own: make(map[int]int)}
}

// startChild calls start, which starts a child and returns its pid, and
// keeps the reaper off that child until release.
func (r *Reaper) startChild(start func() (pid int, err error)) error {
	if r == nil {
		_, err := start()
		return err
	}
	r.starting.RLock()
	defer r.starting.RUnlock()
	pid, err := start()
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.own[pid]++
	r.mu.Unlock()
	return nil
}

// release says that the child of pid has been waited for.
func (r *Reaper) release(pid int) {
	if r == nil {
		return
	}
	r.mu.Lock()
	if r.own[pid]--; r.own[pid] <= 0 {
		delete(r.own, pid)
	}
	r.mu.Unlock()
}

// owns reports whether pid is a Process's child not yet waited for.
func (r *Reaper) owns(pid int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.own[pid] > 0
}
