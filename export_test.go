package simba

import (
	"time"

	"github.com/simba-go/simba/internal/clock"
)

// WithClock makes a service, Locker, Scheduler or Mutexes read the time and set its timers
// on c: the tests of package simba_test use it to pause one simulated process.
func WithClock(c clock.Clock) Option { return withClock(c) }

// MutexState returns the state of the entry of mutex in m ("" when it has none).
func MutexState(m *Mutexes, mutex string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.entries[mutex]; e != nil {
		return e.state.String()
	}
	return ""
}

// The renewal grid's phase is fixed in tests, at the instant a testing/synctest bubble
// begins, so that a simulation's seed replays the same history in another process.
func init() { renewalEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC) }
