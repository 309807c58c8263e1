package redis

import (
	"context"
	_ "embed" // the slot script
	"errors"
	"fmt"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// A Scheduler's slots: the key is in the package doc, "Keys and channels".

var (
	//go:embed claim_slot.lua
	claimSlotLua    string
	claimSlotScript = newScript("claim_slot", claimSlotLua)
)

var _ backend.SlotRecorder = (*contention)(nil)

// slotKey returns the name of mutex's slot record, simba:{mutex}:slot.
func slotKey(mutex string) string { return ownerKey(mutex) + ":slot" }

// LastSlot reads the mutex's slot record (one GET); the zero Slot when there is none.
func (c *contention) LastSlot(ctx context.Context) (backend.Slot, error) {
	if err := c.mutexOnly(ctx, "slots"); err != nil {
		return backend.Slot{}, err
	}
	v, err := c.b.client.Get(ctx, slotKey(c.mutex)).Result()
	if errors.Is(err, goredis.Nil) {
		return backend.Slot{}, nil
	}
	if err != nil {
		return backend.Slot{}, c.b.storeError(ctx, "read the last slot", err)
	}
	s, err := parseSlot(v)
	if err != nil {
		return backend.Slot{}, wrap("read the last slot", err)
	}
	return s, nil
}

// ClaimSlot records s in the mutex's slot record if s is later than the recorded slot and
// its token not less, in one script (claim_slot.lua), and reports whether it did. An
// instant beyond int64 Unix nanoseconds (before 1678 or after 2262) wraps
// simba.ErrInvalidArgument.
func (c *contention) ClaimSlot(ctx context.Context, s backend.Slot) (bool, error) {
	if err := c.mutexOnly(ctx, "slots"); err != nil {
		return false, err
	}
	ns, err := slotNanos(s)
	if err != nil {
		return false, err
	}
	keys := newKeyList("{"+c.mutex+"}", slotKey(c.mutex))
	at, token := strconv.FormatInt(ns, 10), strconv.FormatUint(s.Token, 10)
	v, err := c.b.scripts.run(ctx, claimSlotScript, keys, at, token).Result()
	if err != nil {
		return false, c.b.storeError(ctx, "claim a slot", err)
	}
	switch v {
	case int64(1):
		return true, nil
	case int64(0):
		return false, nil
	}
	return false, wrap("claim a slot", fmt.Errorf("%w: slot %q", ErrUnexpectedReply, fmt.Sprint(v)))
}

// slotNanos returns s's instant in Unix nanoseconds; an error wrapping
// simba.ErrInvalidArgument when they cannot hold it.
func slotNanos(s backend.Slot) (int64, error) {
	ns, ok := s.Nanos()
	if !ok {
		return 0, simba.InvalidArgument("slot instant", s.At, backend.SlotRange)
	}
	return ns, nil
}

// parseSlot parses a slot record, "<Unix ns>@@<token>", as ClaimSlot writes it (no
// leading zeros, as claim_slot.lua reads it).
func parseSlot(v string) (backend.Slot, error) {
	at, token, ok := strings.Cut(v, separator)
	ns, err1 := strconv.ParseInt(at, 10, 64)
	tok, err2 := strconv.ParseUint(token, 10, 64)
	if !ok || err1 != nil || err2 != nil || strconv.FormatInt(ns, 10) != at || strconv.FormatUint(tok, 10) != token {
		return backend.Slot{}, fmt.Errorf("%w: slot %q", ErrUnexpectedReply, v)
	}
	return backend.Slot{At: backend.SlotAt(ns), Token: tok}, nil
}

// mutexOnly returns an error for a call that only a mutex's contention makes (what names
// it), or when the backend is closed or ctx has ended.
func (c *contention) mutexOnly(ctx context.Context, what string) error {
	if c.hold != nil {
		return simba.InvalidArgument("kind", c.hold.hold.Kind, what+" are kept for mutexes only")
	}
	return c.b.usable(ctx)
}
