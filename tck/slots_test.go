package tck

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/simba-go/simba/backend"
)

// The slots check fails against a store that records slots wrongly, each way.
func TestSlotsCheckCatchesBrokenRecorders(t *testing.T) {
	cfg := config{scale: 1, ttl: 1e9, transition: 5e8}
	for _, how := range []string{"forgets", "retry wins", "stale token wins", "not atomic"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			factory := memoryFactory()
			broken := func(t *testing.T) backend.Backend { return brokenSlots{factory(t), how} }
			err := runCheck(t, cfg, newSuiteID(), find(t, "slots"), broken)
			assert.Error(t, err, "the slots check passed against a store whose recorder %s", how)
			t.Logf("caught: %v", err)
		})
	}
}

// brokenSlots records slots on a memory store wrongly, as how says.
type brokenSlots struct {
	backend.Backend
	how string
}

func (b brokenSlots) StartContend(ctx context.Context, p backend.Participant) (backend.Contention, error) {
	c, err := b.Backend.StartContend(ctx, p)
	if err != nil {
		return nil, err
	}
	return brokenRecorder{c.(backend.LeaseContention), c.(backend.SlotRecorder), b.how}, nil
}

type brokenRecorder struct {
	backend.LeaseContention
	rec backend.SlotRecorder
	how string
}

func (r brokenRecorder) LastSlot(ctx context.Context) (backend.Slot, error) {
	if r.how == "forgets" {
		return backend.Slot{}, nil
	}
	return r.rec.LastSlot(ctx)
}

func (r brokenRecorder) ClaimSlot(ctx context.Context, s backend.Slot) (bool, error) {
	last, err := r.rec.LastSlot(ctx)
	if err != nil {
		return false, err
	}
	if r.how == "not atomic" { // checks, then writes: two claims may both pass the check
		if !s.At.After(last.At) || s.Token < last.Token {
			return false, nil
		}
		time.Sleep(20 * time.Millisecond)
		_, err := r.rec.ClaimSlot(ctx, s)
		return err == nil, err
	}
	ok, err := r.rec.ClaimSlot(ctx, s)
	switch {
	case ok || err != nil:
		return ok, err
	case r.how == "retry wins":
		return s.At.Equal(last.At), nil
	case r.how == "stale token wins":
		return s.At.After(last.At), nil
	}
	return false, nil
}
