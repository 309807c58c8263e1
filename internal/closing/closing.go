// Package closing keeps the backend.Participant.Closed callbacks of a backend's open
// contentions, so that the backend's Close can tell each participant that nothing will be
// answered any more.
package closing

import "sync"

// Set is the callbacks of a backend's open contentions. The zero Set is ready to use.
type Set struct {
	mu     sync.Mutex
	closed bool
	next   uint64
	fns    map[uint64]func()
}

// Add keeps f (which may be nil) until remove is called. Once the set is closed it keeps
// nothing and returns ok false: the backend is closed.
func (s *Set) Add(f func()) (remove func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return func() {}, false
	}
	if f == nil {
		return func() {}, true
	}
	if s.fns == nil {
		s.fns = make(map[uint64]func())
	}
	s.next++
	key := s.next
	s.fns[key] = f
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.fns, key)
	}, true
}

// Close calls every function kept, once, outside the set's lock, and makes later Adds
// fail. Later calls do nothing.
func (s *Set) Close() {
	s.mu.Lock()
	fns := s.fns
	s.fns, s.closed = nil, true
	s.mu.Unlock()
	for _, f := range fns {
		f()
	}
}
