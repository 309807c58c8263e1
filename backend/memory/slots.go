package memory

import (
	"context"
	"math"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

var _ backend.SlotRecorder = (*contention)(nil)

// slot is the last slot a Scheduler started on a mutex, as a server store keeps it.
type slot struct {
	at    int64 // Unix nanoseconds
	token uint64
}

// LastSlot returns the slot recorded for the mutex; see backend.SlotRecorder.
func (c *contention) LastSlot(ctx context.Context) (backend.Slot, error) {
	if err := c.backend.check(ctx); err != nil {
		return backend.Slot{}, err
	}
	s := c.backend.store
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.slots[groupKey{c.hold.Kind, c.mutex}]
	if !ok {
		return backend.Slot{}, nil
	}
	return backend.Slot{At: time.Unix(0, r.at), Token: r.token}, nil
}

// ClaimSlot records sl if it is later than the recorded slot and its token not less; see
// backend.SlotRecorder.
func (c *contention) ClaimSlot(ctx context.Context, sl backend.Slot) (bool, error) {
	if err := c.backend.check(ctx); err != nil {
		return false, err
	}
	if sl.At.Before(minSlot) || sl.At.After(maxSlot) {
		return false, simba.InvalidArgument("slot instant", sl.At, "must lie between 1678 and 2262 (Unix nanoseconds)")
	}
	s := c.backend.store
	s.mu.Lock()
	defer s.mu.Unlock()
	at := sl.At.UnixNano()
	if r, ok := s.slots[groupKey{c.hold.Kind, c.mutex}]; ok && (at <= r.at || sl.Token < r.token) {
		return false, nil
	}
	s.slots[groupKey{c.hold.Kind, c.mutex}] = slot{at: at, token: sl.Token}
	return true, nil
}

// The instants whose Unix nanoseconds an int64 holds.
var (
	minSlot = time.Unix(0, math.MinInt64)
	maxSlot = time.Unix(0, math.MaxInt64)
)
