package mcpclient

import (
	"slices"
	"sync"
)

// nameLocks serialises the operations on one server name (start, replace,
// restart, enable, remove), so that two of them on a name cannot
// interleave, while operations on other names go on: a server slow to stop
// holds up no other.
type nameLocks struct {
	mu   sync.Mutex
	held map[string]chan struct{} // closed when the holder lets go
}

// lock takes the locks of names, in sorted order so that two callers
// cannot each wait for the other, and returns what releases them.
func (l *nameLocks) lock(names ...string) (unlock func()) {
	names = slices.Compact(slices.Sorted(slices.Values(names)))
	for _, name := range names {
		for {
			l.mu.Lock()
			busy, taken := l.held[name]
			if !taken {
				if l.held == nil {
					l.held = make(map[string]chan struct{})
				}
				l.held[name] = make(chan struct{})
				l.mu.Unlock()
				break
			}
			l.mu.Unlock()
			<-busy
		}
	}
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, name := range names {
			close(l.held[name])
			delete(l.held, name)
		}
	}
}

// begin takes the locks of names for an operation and counts it, so that
// Close waits for it; ok is false once the Manager is closed (the locks
// are held all the same: end releases them).
func (m *Manager) begin(names ...string) (end func(), ok bool) {
	unlock := m.names.lock(names...)
	m.mu.Lock()
	ok = !m.closed
	if ok {
		m.ops.Add(1)
	}
	m.mu.Unlock()
	return func() {
		if ok {
			m.ops.Done()
		}
		unlock()
	}, ok
}
