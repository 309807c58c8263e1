package redis

import (
	"context"
	_ "embed" // the Lua scripts of holds
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// Semaphores and read-write locks: the keys and scripts are in the package doc,
// "Semaphores and read-write locks", and in holds_prelude.lua.

var (
	//go:embed holds_prelude.lua
	holdsPreludeLua string
	//go:embed holds_acquire.lua
	holdsAcquireLua string
	//go:embed holds_release.lua
	holdsReleaseLua string
	//go:embed holds_lookup.lua
	holdsLookupLua string
	//go:embed holds_waiting.lua
	holdsWaitingLua string
	//go:embed holds_stop.lua
	holdsStopLua string

	holdsAcquireScript = newHoldsScript("holds_acquire", holdsAcquireLua)
	holdsReleaseScript = newHoldsScript("holds_release", holdsReleaseLua)
	holdsLookupScript  = readOnly(newHoldsScript("holds_lookup", holdsLookupLua))
	holdsWaitingScript = newHoldsScript("holds_waiting", holdsWaitingLua)
	holdsStopScript    = newHoldsScript("holds_stop", holdsStopLua)
)

var _ backend.Holder = (*Backend)(nil)

// Holds reports that the backend keeps semaphores and read-write locks as well as
// mutexes; see backend.Holder. (A Quorum keeps mutexes only.)
func (b *Backend) Holds(k backend.Kind) bool {
	return k == backend.Mutex || k == backend.Semaphore || k == backend.RWLock
}

// holding is a semaphore's or read-write lock's side of a contention; nil for a mutex.
type holding struct {
	hold    backend.Hold
	keys    keyList // holdKeys
	channel string  // simba:<kind>:{name}: the admissions and releases that reach waiters
	mode    string  // "p" a permit, "s" a read hold, "x" a write hold
	permits string  // a semaphore's, "" otherwise
	fresh   bool    // no answer yet: the next acquire begins a new hold (see holds_acquire.lua)
}

// holdPrefix returns the first part of the keys and channel of a name of kind k:
// simba:sem: or simba:rw:, never simba:{, which begins every key of a mutex.
func holdPrefix(k backend.Kind) string {
	if k == backend.Semaphore {
		return "simba:sem:"
	}
	return "simba:rw:"
}

// holdKeys returns the KEYS of every hold script of name, in holds_prelude.lua's order.
func holdKeys(k backend.Kind, name string) keyList {
	base := holdPrefix(k) + "{" + name + "}"
	return newKeyList(base+":holders", base+":holds", base+":queue", base+":alive",
		base+":writers", base+":permits", base+":fence", base+":stopped")
}

// newHolding returns the holding of a participant that asks for a semaphore or read-write
// lock, or nil for a mutex.
func newHolding(p backend.Participant) *holding {
	if p.Hold.Kind == backend.Mutex {
		return nil
	}
	h := &holding{
		hold:    p.Hold,
		keys:    holdKeys(p.Hold.Kind, p.Mutex),
		channel: holdPrefix(p.Hold.Kind) + "{" + p.Mutex + "}",
		mode:    "x",
		fresh:   true,
	}
	switch {
	case p.Hold.Kind == backend.Semaphore:
		h.mode, h.permits = "p", strconv.Itoa(p.Hold.Permits)
	case p.Hold.Shared:
		h.mode = "s"
	}
	return h
}

// acquireHold admits or renews the contender's hold, or queues it, registered for a
// grant; a waiter subscribes the name's channel, where releases admit the waiters that
// now fit (see grantedHold) or name those they let in.
func (c *contention) acquireHold(ctx context.Context) (backend.Record, error) {
	if err := c.b.usable(ctx); err != nil {
		return backend.Record{}, err
	}
	h := c.hold
	if !c.joined && c.b.hub.joinIfLive(c) {
		c.joined = true
	}
	fresh := "0"
	if h.fresh && !c.owner.Load() {
		// A grant answered a call of this contention: the hold its ID has is its own.
		fresh = "1"
	}
	nonce, seq := c.nextNonce()
	v, err := c.b.scripts.run(ctx, holdsAcquireScript, h.keys, c.id, h.mode, h.permits, c.ttl, c.lease, fresh, h.hold.Beside, nonce).Result()
	if err != nil {
		c.noteUnanswered(err, nonce)
		return backend.Record{}, c.b.storeError(ctx, "acquire", err)
	}
	rec, err := c.holdRecord("acquire", v)
	if err != nil {
		return backend.Record{}, err
	}
	h.fresh = false
	mine := c.applyHold(rec, seq)
	if !mine && !c.joined {
		c.join() // the hub wakes it once subscribed: nothing published before is missed for long
	}
	return rec, nil
}

// applyHold applies the answer to the acquire call with nonce number seq (0: none), and
// reports whether it names this contender.
func (c *contention) applyHold(rec backend.Record, seq uint64) bool {
	mine := rec.Owner == c.id
	c.mu.Lock()
	defer c.mu.Unlock()
	if !mine && seq != 0 && seq <= c.grantedSeq {
		// A call sent no later than the attempt a grant answered: older than the grant,
		// so passed on (simba drops it) but changing nothing here.
		return false
	}
	c.owner.Store(mine)
	c.token = 0
	if mine {
		c.token = rec.Token
		c.checkToken(rec.Token) // only its own: other holders' tokens come in any order
	}
	return mine
}

// holdRecord decodes the answer of a hold script run by op (see holds_prelude.lua).
func (c *contention) holdRecord(op string, v any) (backend.Record, error) {
	list, _ := v.([]any)
	parts := make([]string, len(list))
	for i, x := range list {
		parts[i], _ = x.(string)
	}
	if len(parts) == 2 && parts[0] == "permits" {
		return backend.Record{}, fmt.Errorf("simba/redis: %v %q has %s permits, not %d: %w",
			c.hold.hold.Kind, c.mutex, parts[1], c.hold.hold.Permits, simba.ErrRefused)
	}
	if len(parts) != 4 {
		return backend.Record{}, wrap(op, fmt.Errorf("%w: %#v", ErrUnexpectedReply, v))
	}
	owner, left, err := parseOwner(parts[0])
	if err != nil || owner == "" {
		return backend.Record{}, wrapIf(op, err)
	}
	token, err := parseToken(parts[1])
	if err != nil {
		return backend.Record{}, wrap(op, err)
	}
	var ms [2]int64 // to the ttl end (negative once it passed), and held
	for i, s := range parts[2:] {
		if ms[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			return backend.Record{}, wrap(op, fmt.Errorf("%w: %q: %w", ErrUnexpectedReply, s, err))
		}
	}
	return backend.Record{
		Owner:      owner,
		TTL:        time.Duration(ms[0]) * time.Millisecond,
		Transition: left,
		Held:       time.Duration(ms[1]) * time.Millisecond,
		Token:      token,
	}, nil
}

// wrapIf is wrap(op, err), or nil for a nil err.
func wrapIf(op string, err error) error {
	if err == nil {
		return nil
	}
	return wrap(op, err)
}

// releaseHold gives the hold up, or leaves the queue, waking the waiters that now fit.
func (c *contention) releaseHold(ctx context.Context) error {
	if err := c.b.usable(ctx); err != nil {
		return err
	}
	if err := c.b.scripts.run(ctx, holdsReleaseScript, c.hold.keys, c.id, c.hold.mode).Err(); err != nil {
		return c.b.storeError(ctx, "", err)
	}
	c.owner.Store(false)
	c.mu.Lock()
	c.token = 0
	c.mu.Unlock()
	return nil
}

// lookupHold reads the hold whose transition ends first.
func (c *contention) lookupHold(ctx context.Context) (backend.Record, error) {
	if err := c.b.usable(ctx); err != nil {
		return backend.Record{}, err
	}
	v, err := c.b.scripts.run(ctx, holdsLookupScript, c.hold.keys, "", c.hold.mode).Result()
	if err != nil {
		return backend.Record{}, c.b.storeError(ctx, "lookup", err)
	}
	return c.holdRecord("lookup", v)
}

// othersWaitingHold reports whether a live waiter other than this contender is queued.
func (c *contention) othersWaitingHold(ctx context.Context) (bool, error) {
	if err := c.b.usable(ctx); err != nil {
		return false, err
	}
	n, err := c.b.scripts.run(ctx, holdsWaitingScript, c.hold.keys, c.id, c.hold.mode).Int()
	if err != nil {
		return false, c.b.storeError(ctx, "read the queue", err)
	}
	return n == 1, nil
}

// hintHold reacts to a message on the name's channel: an admission that names this
// contender is its grant (see grantedHold); a release that names it, or names none, makes
// a waiter attempt at once; a retriever looks up at either.
func (c *contention) hintHold(m message) {
	switch {
	case c.id == "":
		c.wake()
	case c.owner.Load():
	case m.event == admitted:
		c.grantedHold(m.woken)
	case m.event == released && (m.woken == "" || slices.Contains(strings.Split(m.woken, separator), c.id)):
		c.wake()
	}
}

// grantedHold takes this contender's grant from an admission's entries,
// "<id>@@<nonce>@@<token>@@<id>@@<nonce>@@<token>...", if one names it.
func (c *contention) grantedHold(entries string) {
	parts := strings.Split(entries, separator)
	for i := 0; i+2 < len(parts); i += 3 {
		if parts[i] != c.id {
			continue
		}
		token, err := strconv.ParseUint(parts[i+2], 10, 64)
		if err != nil || token == 0 {
			c.wake() // a garbled grant: the next attempt finds out
			return
		}
		c.granted(parts[i+1], token)
		return
	}
}
