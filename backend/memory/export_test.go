package memory

// Waiting returns how many contenders wait for mutex, so that benchmarks can start timing
// a hand-over only once the waiter is waiting.
func (s *Store) Waiting(mutex string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.records[mutex]; ok {
		return len(r.waiters)
	}
	return 0
}
