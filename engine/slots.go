package engine

import (
	"context"
	"sync"
)

// readSlots is what the engine's two read queues share, the cache's
// misses (readingCache) and strong reads (strongReads): at most max store
// reads run at once, and every caller waiting for one to end (for its own
// result, or for a free slot to read the queue itself) hears when one
// does. Its methods are called with the queue's lock held.
type readSlots struct {
	max, running int
	ended        chan struct{} // closed, and replaced, when a store read ends
}

func newReadSlots(max int) readSlots { return readSlots{max: max, ended: make(chan struct{})} }

// free reports whether a store read may start.
func (s *readSlots) free() bool { return s.running < s.max }

// take records that a store read starts.
func (s *readSlots) take() { s.running++ }

// release records that a store read ended and wakes those waiting.
func (s *readSlots) release() {
	s.running--
	close(s.ended)
	s.ended = make(chan struct{})
}

// wait releases mu until a store read ends or ctx ends, and takes it
// again.
func (s *readSlots) wait(ctx context.Context, mu *sync.Mutex) {
	ended := s.ended
	mu.Unlock()
	select {
	case <-ended:
	case <-ctx.Done():
	}
	mu.Lock()
}
