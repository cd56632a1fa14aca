package namelock

import (
	"sync"
	"testing"
)

// TestLockSerialisesOneName: holders of one name never overlap, holders
// of overlapping sets taken in opposite orders do not deadlock, and a
// name's lock does not wait for another name.
func TestLockSerialisesOneName(t *testing.T) {
	var s Set
	var mu sync.Mutex
	inside := map[string]int{}
	enter := func(names []string) {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range names {
			inside[n]++
			if inside[n] > 1 {
				t.Errorf("two holders of %q at once", n)
			}
		}
	}
	leave := func(names []string) {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range names {
			inside[n]--
		}
	}
	var wg sync.WaitGroup
	for i := range 200 {
		names := []string{"a", "b"}
		if i%2 == 1 {
			names = []string{"b", "a"}
		}
		wg.Go(func() {
			unlock := s.Lock(names...)
			enter(names)
			leave(names)
			unlock()
		})
	}
	wg.Wait()

	unlockA := s.Lock("a")
	s.Lock("c")() // another name: taken and released while "a" is held
	unlockA()
	s.Lock("a")()      // released names can be taken again
	s.Lock("a", "a")() // a name given twice is taken once
	if len(s.held) != 0 {
		t.Errorf("locks left held: %v", s.held)
	}
}
