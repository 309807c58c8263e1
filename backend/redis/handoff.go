package redis

import (
	"context"
	_ "embed" // the hand-off scripts
	"fmt"
	"strconv"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// Hand-offs: see the package doc, "Hand-offs".

var (
	//go:embed hand_off.lua
	handOffLua string
	//go:embed waiters.lua
	waitersLua string

	handOffScript = newScript("hand_off", handOffLua)
	waitersScript = readOnly(newScript("waiters", waitersLua))
)

var _ backend.HandOffer = (*contention)(nil)

// Waiters lists the Go contenders of this version that wait for the mutex, first come
// first, with their owner values (one script: waiters.lua). JVM contenders and contenders
// of versions before hand-offs wait too, unlisted: a hand-off cannot serve them.
func (c *contention) Waiters(ctx context.Context) ([]backend.Waiter, error) {
	if err := c.mutexOnly(ctx, "hand-offs"); err != nil {
		return nil, err
	}
	v, err := c.b.scripts.run(ctx, waitersScript, c.keys).StringSlice()
	if err != nil {
		return nil, c.b.storeError(ctx, "read the waiters", err)
	}
	if len(v)%2 != 0 {
		return nil, wrap("read the waiters", fmt.Errorf("%w: %q", ErrUnexpectedReply, v))
	}
	waiters := make([]backend.Waiter, 0, len(v)/2)
	for i := 0; i < len(v); i += 2 {
		waiters = append(waiters, backend.Waiter{ID: v[i], Value: v[i+1]})
	}
	return waiters, nil
}

// HandOff gives the mutex to the waiter to, with a new tenure, and queues this contender
// behind the waiters, registered for a grant as an attempt registers it (one script:
// hand_off.lua). It fails with an error wrapping simba.ErrNotOwner when this contender's
// tenure does not hold the mutex, simba.ErrNotWaiting when to is not among Waiters (or
// is gone), and simba.ErrInvalidArgument for a bad ID; then it changes nothing.
func (c *contention) HandOff(ctx context.Context, to string) error {
	if err := c.mutexOnly(ctx, "hand-offs"); err != nil {
		return err
	}
	if err := simba.ValidateContenderID(to); err != nil {
		return err
	}
	if err := c.b.ValidateContenderID(to); err != nil {
		return err
	}
	what := "hand off to " + strconv.Quote(to)
	if c.id == "" {
		return wrap(what, fmt.Errorf("%w: a retriever owns nothing", simba.ErrNotOwner))
	}
	c.mu.Lock()
	tenure := strconv.FormatUint(c.token, 10)
	c.mu.Unlock()
	heard := c.hearing()
	nonce, seq := c.nextNonce()
	n, err := c.b.scripts.run(ctx, handOffScript, c.keys, c.id, tenure, to, c.b.exact, nonce, c.lease, c.ttl, heard, c.value).Int()
	c.listed = listed // whatever the outcome: the call may have queued it
	if err != nil {
		return c.b.storeError(ctx, what, err)
	}
	switch n {
	case 0:
		return wrap(what, simba.ErrNotOwner)
	case -1:
		return wrap(what, simba.ErrNotWaiting)
	}
	c.handedOff(seq)
	if !c.joined {
		c.join() // as a waiter's first attempt does: it hears its grant
	}
	return nil
}

// handedOff notes that the hand-off whose registration has nonce number seq (0: none)
// gave the mutex away: the contender waits now, unless a grant answering that
// registration came first (to released at once), which made it the owner again.
func (c *contention) handedOff(seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if seq == 0 || c.grantedSeq < seq {
		c.owner.Store(false)
		c.token = 0
	}
}
