package tck

import (
	"context"
	"sync"
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
			factory, refused := memoryFactory(), &refusedClaims{latest: map[string]backend.Slot{}}
			broken := func(t *testing.T) backend.Backend { return brokenSlots{factory(t), how, refused} }
			err := runCheck(t, cfg, newSuiteID(), find(t, "slots"), broken)
			assert.Error(t, err, "the slots check passed against a store whose recorder %s", how)
			t.Logf("caught: %v", err)
		})
	}
}

// brokenSlots records slots on a memory store wrongly, as how says.
type brokenSlots struct {
	backend.Backend
	how     string
	refused *refusedClaims // shared by the backends of one check
}

func (b brokenSlots) StartContend(ctx context.Context, p backend.Participant) (backend.Contention, error) {
	c, err := b.Backend.StartContend(ctx, p)
	if err != nil {
		return nil, err
	}
	return brokenRecorder{c.(backend.LeaseContention), c.(backend.SlotRecorder), b.how, p.Mutex, b.refused}, nil
}

type brokenRecorder struct {
	backend.LeaseContention
	rec     backend.SlotRecorder
	how     string
	mutex   string
	refused *refusedClaims
}

// refusedClaims keeps, by mutex, the latest claim the store refused, which a minority of a
// quorum may have recorded ("minority keeps a refused claim").
type refusedClaims struct {
	mu     sync.Mutex
	latest map[string]backend.Slot
}

func (r *refusedClaims) add(mutex string, s backend.Slot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if laterSlot(s, r.latest[mutex]) {
		r.latest[mutex] = s
	}
}

func (r *refusedClaims) get(mutex string) backend.Slot {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.latest[mutex]
}

func (r brokenRecorder) LastSlot(ctx context.Context) (backend.Slot, error) {
	last, err := r.rec.LastSlot(ctx)
	switch {
	case r.how == "forgets":
		return backend.Slot{}, nil
	case err != nil || last.At.IsZero():
		return last, err
	case r.how == "reads an unclaimed slot":
		return backend.Slot{At: last.At.Add(time.Millisecond), Token: last.Token}, nil
	case r.how == "minority keeps a refused claim" && laterSlot(r.refused.get(r.mutex), last):
		return r.refused.get(r.mutex), nil
	}
	return last, nil
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
	if !ok && err == nil {
		r.refused.add(r.mutex, s)
	}
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

// A quorum of stores may leave a claim that fell short recorded on a minority, and its
// LastSlot may then read it (later than the last claim that won, never earlier): the
// slots check accepts that with WithMinorityClaims, and only then.
func TestSlotsCheckAcceptsMinorityClaimsOnlyWhenTold(t *testing.T) {
	check := func(how string, opts ...Option) error {
		cfg := config{scale: 1, ttl: 1e9, transition: 5e8}
		for _, o := range opts {
			o(&cfg)
		}
		factory, refused := memoryFactory(), &refusedClaims{latest: map[string]backend.Slot{}}
		broken := func(t *testing.T) backend.Backend { return brokenSlots{factory(t), how, refused} }
		return runCheck(t, cfg, newSuiteID(), find(t, "slots"), broken)
	}
	assert.Error(t, check("minority keeps a refused claim"), "a refused claim read back passed without WithMinorityClaims")
	assert.NoError(t, check("minority keeps a refused claim", WithMinorityClaims()))
	for _, how := range []string{"forgets", "retry wins", "stale token wins", "not atomic", "reads an unclaimed slot"} {
		err := check(how, WithMinorityClaims())
		assert.Error(t, err, "the slots check with WithMinorityClaims passed against a store whose recorder %s", how)
		t.Logf("%s: caught: %v", how, err)
	}
}
