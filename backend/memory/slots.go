package memory

import (
	"context"

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
	return backend.Slot{At: backend.SlotAt(r.at), Token: r.token}, nil
}

// ClaimSlot records sl if it is later than the recorded slot and its token not less; see
// backend.SlotRecorder.
func (c *contention) ClaimSlot(ctx context.Context, sl backend.Slot) (bool, error) {
	if err := c.backend.check(ctx); err != nil {
		return false, err
	}
	at, ok := sl.Nanos()
	if !ok {
		return false, simba.InvalidArgument("slot instant", sl.At, backend.SlotRange)
	}
	s := c.backend.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.slots[groupKey{c.hold.Kind, c.mutex}]; ok && (at <= r.at || sl.Token < r.token) {
		return false, nil
	}
	s.slots[groupKey{c.hold.Kind, c.mutex}] = slot{at: at, token: sl.Token}
	return true, nil
}
