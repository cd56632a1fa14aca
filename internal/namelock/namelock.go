// Package namelock provides a lock per name: work on one server name
// (start, replace, restart, enable, remove) is serialised, while work on
// other names goes on, so that a server slow to stop holds up no other.
package namelock

import (
	"slices"
	"sync"
)

// Set is a lock per name. The zero Set is ready to use; it must not be
// copied after first use.
type Set struct {
	mu   sync.Mutex
	held map[string]chan struct{} // closed when the holder lets go
}

// Lock takes the locks of names, waiting for those another holds, and
// returns what releases them. Several names are taken in sorted order, so
// that two holders of overlapping names cannot each wait for the other.
func (s *Set) Lock(names ...string) (unlock func()) {
	names = slices.Compact(slices.Sorted(slices.Values(names)))
	for _, name := range names {
		for {
			s.mu.Lock()
			busy, taken := s.held[name]
			if !taken {
				if s.held == nil {
					s.held = make(map[string]chan struct{})
				}
				s.held[name] = make(chan struct{})
				s.mu.Unlock()
				break
			}
			s.mu.Unlock()
			<-busy
		}
	}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, name := range names {
			close(s.held[name])
			delete(s.held, name)
		}
	}
}
