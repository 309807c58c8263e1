package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/backend"
)

// contention is one participant's contention for one mutex.
type contention struct {
	b          *Backend
	forget     func()  // forgets the participant's Closed: at StopContend
	mutex, id  string  // id is empty for a retriever
	value      string  // the owner value of the contender's tenures (Participant.Value)
	keys       keyList // Backend.scriptKeys: the KEYS of every script of the mutex
	lease      string  // ttl + transition in ms: the PX of the owner key
	leaseDur   time.Duration
	ttl        string // in ms
	ttlDur     time.Duration
	transition time.Duration
	key        string // simba:{mutex}: the owner key, and the channel of acquisitions
	inbox      string // simba:{mutex}:<id>: releases addressed to this contender; "" for a retriever
	releases   string // simba:{mutex}:@@released: every release that left the key free
	wake       func()
	report     func(backend.Record, time.Time) // nil: the participant needs no news of other owners
	waitsOnly  bool                            // a Locker's: no news of other owners while it waits
	grant      func(backend.Record, time.Time) // nil: the contender takes no grants
	nonces     string                          // a random prefix of this contention's nonces
	log        *slog.Logger
	hold       *holding // a semaphore's or read-write lock's (holds.go); nil for a mutex

	// owner: the last answer named this contender, so the next attempt renews with the
	// guard script. Read by the hub's goroutine.
	owner atomic.Bool

	// Used only by the method calls, which simba makes one at a time.
	joined    bool    // subscribed to its channels
	takeovers bool    // a waitsOnly contention that has renewed: it listens for acquisitions too
	listed    listing // whether it may be in the waiting set (and registered for a grant)
	fresh     bool    // no acquire call has been answered yet: the scripts' "fresh"
	// unanswered: an acquire call carrying a nonce got no answer, and may still reach the
	// server; StopContend records the contention as stopped (stop.lua).
	unanswered bool

	// Guarded by the hub's mu.
	routed []string // the channels the hub routes to this contention

	mu         sync.Mutex // guards the fields below, which grants change too
	token      uint64     // the token of this contender's tenure while answers name it
	lastToken  uint64     // the last non-zero token an answer showed, to notice regressions
	seq        uint64     // the number of the latest nonce
	attempts   [2]attempt // the latest two acquire calls that carried a nonce, oldest first
	grantedSeq uint64     // the nonce number the latest grant taken answered
}

// listing is what a contention knows of its entry in the waiting set: the scripts' "listed"
// argument.
type listing string

const (
	// unlisted: not in the waiting set, nor registered for a grant.
	unlisted listing = "0"
	// listed: in the waiting set, or it was until a release took it off; or, for a new
	// contention, an entry its contender ID left in an earlier lifecycle (a process that
	// ended without a release, then started again) may be there.
	listed listing = "1"
)

// unlistedIDs remembers the contenders whose last contention of a mutex on this backend
// ended out of the waiting set and unregistered: the next contention of the same ID
// starts unlisted and needs no clean-up, whose commands would cost an uncontended Locker
// cycle a sixth more. Only a contention of the same ID elsewhere (another process, or
// another backend of this one) could have queued it since, which no two live
// contenders do. It holds at most maxUnlisted entries and starts over when full; an ID
// it forgot just starts listed.
type unlistedIDs struct {
	mu  sync.Mutex
	ids map[unlistedID]struct{}
}

type unlistedID struct{ mutex, id string }

const maxUnlisted = 1024

func (u *unlistedIDs) add(mutex, id string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ids == nil || len(u.ids) >= maxUnlisted {
		u.ids = map[unlistedID]struct{}{}
	}
	u.ids[unlistedID{mutex, id}] = struct{}{}
}

// take reports whether id's last contention of mutex ended unlisted, and forgets it.
func (u *unlistedIDs) take(mutex, id string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	k := unlistedID{mutex, id}
	_, ok := u.ids[k]
	delete(u.ids, k)
	return ok
}

// attempt is an acquire call that registered for a grant if it found the mutex taken.
type attempt struct {
	seq  uint64
	sent time.Time // taken before the call was sent
}

var (
	_ backend.LeaseContention = (*contention)(nil)
	_ backend.WaitList        = (*contention)(nil)
)

// scriptKeys returns the KEYS of every script of mutex: '{mutex}', then, on a Cluster,
// the mutex's keys, which the scripts never read (see the package doc, Scripts).
func (b *Backend) scriptKeys(mutex string) keyList {
	if !b.slotsMove {
		return newKeyList("{" + mutex + "}")
	}
	key := ownerKey(mutex)
	// Redis Cluster must see the keys: while a slot moves, the source runs a call only if
	// it has every key the call names, redirects it to the target only if it has none,
	// and otherwise answers TRYAGAIN; the target runs a redirected call only if it has
	// every key. '{mutex}' alone, which never exists, sent every call to the target while
	// the mutex's keys were still on the source: a second owner. Named, a call waits
	// (TRYAGAIN) until the keys have moved.
	return newKeyList("{"+mutex+"}", key, key+":contender", key+":token", key+":grant", key+":stopped", key+":retrievers")
}

// ownerKey returns the name of mutex's owner key, which the other keys' names extend.
func ownerKey(mutex string) string { return "simba:{" + mutex + "}" }

// stoppedFor is how long the stopped key remembers a contention that stopped with an
// acquire call unanswered (stop.lua): a call held on a network path longer than that is
// not caught (TCP gives up on a connection's unacknowledged data after some minutes).
const stoppedFor = 5 * time.Minute

// watchedFor is how long a retriever's mark on a mutex (watch.lua) outlasts the owner key
// it saw: past its next lookup, which comes by the end of that owner's transition, plus
// its jitter, or at any message.
const watchedFor = time.Minute

// names are the strings a contention derives from its participant's mutex, ID, ttl and
// transition: the same for the next contention of the participant (a Locker opens one per
// acquisition), which reuses them (see Backend.lastNames).
type names struct {
	mutex, id          string
	ttlDur, transition time.Duration

	keys       keyList
	key        string
	releases   string
	inbox      string // "" for a retriever
	lease, ttl string // in ms
}

// namesOf returns the names of p: the last contention's when they were p's.
func (b *Backend) namesOf(p backend.Participant) *names {
	if n := b.lastNames.Load(); n != nil && n.mutex == p.Mutex && n.id == p.ContenderID && n.ttlDur == p.TTL && n.transition == p.Transition {
		return n
	}
	key := ownerKey(p.Mutex)
	n := &names{
		mutex: p.Mutex, id: p.ContenderID, ttlDur: p.TTL, transition: p.Transition,
		keys:     b.scriptKeys(p.Mutex),
		key:      key,
		releases: key + releaseChannelSuffix,
		lease:    strconv.FormatInt((p.TTL + p.Transition).Milliseconds(), 10),
		ttl:      strconv.FormatInt(p.TTL.Milliseconds(), 10),
	}
	if p.ContenderID != "" {
		n.inbox = key + ":" + p.ContenderID
	}
	b.lastNames.Store(n)
	return n
}

// noncePrefix returns the nonce prefix of a new contention, "<8 characters>-": unique
// among the backend's 2^40 next ones, so that a grant that answers another contention's
// attempt (an earlier one of the same ID, or another process's) names none of its own, as
// a prefix drawn per contention (rand.Text) would, without its cost a section.
func (b *Backend) noncePrefix() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567" // rand.Text's
	v := b.nonceBase + b.contentions.Add(1)
	var p [9]byte
	for i := range 8 {
		p[i] = alphabet[v&31]
		v >>= 5
	}
	p[8] = '-'
	return string(p[:])
}

func newContention(b *Backend, p backend.Participant) *contention {
	lease := p.TTL + p.Transition
	n := b.namesOf(p)
	c := &contention{
		b:          b,
		mutex:      p.Mutex,
		id:         p.ContenderID,
		keys:       n.keys,
		lease:      n.lease,
		leaseDur:   lease,
		ttl:        n.ttl,
		ttlDur:     p.TTL,
		transition: p.Transition,
		key:        n.key,
		releases:   n.releases,
		wake:       p.Wake,
		grant:      p.Grant,
		log:        p.Logger,
		listed:     listed,
		fresh:      true,
		hold:       newHolding(p),
		value:      p.Value,
	}
	if c.grant != nil && c.id != "" {
		c.nonces = b.noncePrefix()
	} else {
		c.grant = nil
	}
	if c.id != "" {
		if b.unlisted.take(p.Mutex, c.id) {
			c.listed = unlisted // the ID's last contention on this backend left the waiting set
		}
		c.inbox = n.inbox
		if p.WaitsOnly {
			c.waitsOnly = true
		} else {
			c.report = p.Report
		}
	}
	if c.wake == nil {
		c.wake = func() {}
	}
	if c.log == nil {
		c.log = b.log.With("mutex", p.Mutex, "contender", p.ContenderID)
	}
	return c
}

// Acquire runs the acquire script, or the guard script once an answer named this
// contender the owner (see the package doc, Scripts).
func (c *contention) Acquire(ctx context.Context) (backend.Record, error) {
	if c.hold != nil {
		return c.acquireHold(ctx)
	}
	if err := c.b.usable(ctx); err != nil {
		return backend.Record{}, err
	}
	var (
		v   any
		err error
	)
	op, seq := "acquire", uint64(0)
	if c.owner.Load() {
		op = "renew"
		v, err = c.renew(ctx)
	} else {
		v, seq, err = c.runAcquire(ctx)
	}
	if err != nil {
		return backend.Record{}, c.b.storeError(ctx, op, err)
	}
	a, err := parseAnswer(v)
	if err != nil {
		return backend.Record{}, wrap(op, err)
	}
	rec := c.record(a, seq)
	if rec.Owner == c.id && op == "acquire" {
		c.listed = unlisted
	}
	grow := c.waitsOnly && op == "renew" && !c.takeovers
	if grow {
		// A Locker's waiter does not listen for acquisitions, which only tell it of other
		// owners; as an owner it needs them, to hear a takeover at once.
		c.takeovers = true
	}
	if grow || (!c.joined && (rec.Owner != c.id || op == "renew")) {
		// The first attempt that has to wait subscribes, and so does an owner at its
		// first renewal: from then on it hears at once when another contender takes the
		// mutex (its key lapsed, or was lost in a restart). A short critical section that
		// ends before its first renewal never subscribes. The subscription is made in the
		// background; the hub wakes the contender once the server confirms it, so that
		// what was published before then is not missed for long: the next attempt comes
		// right after.
		c.join()
	}
	return rec, nil
}

// renew runs the guard script for a contender that owns the mutex: together with other
// contentions' renewals, where the backend sends them together.
func (c *contention) renew(ctx context.Context) (any, error) {
	if c.b.renewals != nil {
		return c.b.renewals.renew(ctx, c)
	}
	return c.b.scripts.run(ctx, guardScript, c.keys, c.id, c.lease).Result()
}

// runAcquire runs the acquire script for a contender that does not own the mutex, and
// returns its answer and the sequence number of the nonce it registered.
func (c *contention) runAcquire(ctx context.Context) (any, uint64, error) {
	heard := c.hearing()
	nonce, seq := c.nextNonce()
	v, err := c.b.scripts.run(ctx, acquireScript, c.keys, c.id, c.lease, flag(c.listed == listed), nonce, c.ttl, heard, flag(c.fresh), c.value).Result()
	// Whatever the outcome, the call may have queued the contender, until an answer names
	// it the owner: the script took it off then.
	c.listed = listed
	if err == nil {
		c.fresh = false
	}
	c.noteUnanswered(err, nonce)
	return v, seq, err
}

// noteUnanswered notes an acquire call carrying nonce whose error is not the server's
// reply: the call may still reach the server (see StopContend).
func (c *contention) noteUnanswered(err error, nonce string) {
	if err == nil || nonce == "" {
		return
	}
	if code, _ := replyOf(err); code == "" {
		c.unanswered = true
	}
}

// hearing returns the scripts' heard argument for a call about to be sent: whether the
// contender's own channel is subscribed. A contention that has not joined the hub joins
// at once when its channels are still subscribed (see hub.joinIfLive).
func (c *contention) hearing() any {
	if !c.joined && c.b.hub.joinIfLive(c) {
		c.joined = true // its channels are still subscribed: listen from before the call
	}
	return flag(c.joined && c.b.hub.hears(c.inbox))
}

// flag returns a scripts' flag argument: "1" if set, else "0". Boxed from a constant, it
// allocates nothing, where a string variable passed as an argument allocates.
func flag(set bool) any {
	if set {
		return "1"
	}
	return "0"
}

// Release runs the release script: the owner hands the mutex over (see the package doc,
// Hand-over, end to end); anyone else only leaves the waiting set.
func (c *contention) Release(ctx context.Context) error {
	if c.hold != nil {
		return c.releaseHold(ctx)
	}
	return c.release(ctx)
}

// release runs the release script; a Quorum passes the tenure's token, to raise its token key
// to it first.
func (c *contention) release(ctx context.Context, raiseTo ...any) error {
	if err := c.b.usable(ctx); err != nil {
		return err
	}
	if err := c.b.scripts.run(ctx, releaseScript, c.keys, append([]any{c.id, flag(c.listed == listed), c.b.exact}, raiseTo...)...).Err(); err != nil {
		return c.b.storeError(ctx, "", err)
	}
	c.listed = unlisted
	c.owner.Store(false)
	c.mu.Lock()
	c.token = 0
	c.mu.Unlock()
	return nil
}

// nextNonce returns the nonce of an acquire call about to be sent and its number,
// remembering when it was sent, or "" and 0 when the contender takes no grants.
func (c *contention) nextNonce() (string, uint64) {
	if c.grant == nil {
		return "", 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	c.attempts[0], c.attempts[1] = c.attempts[1], attempt{seq: c.seq, sent: time.Now()}
	return c.nonces + strconv.FormatUint(c.seq, 10), c.seq
}

// granted takes a grant addressed to this contender: Participant.Grant from the send time
// of the attempt its nonce names, or a wake-up (see the package doc, Hand-over, end to
// end: step 4 of a hand-over).
func (c *contention) granted(nonce string, token uint64) {
	number, ours := strings.CutPrefix(nonce, c.nonces)
	seq, err := strconv.ParseUint(number, 10, 64)
	c.mu.Lock()
	var sent time.Time
	for _, a := range c.attempts {
		if ours && err == nil && seq != 0 && a.seq == seq {
			sent = a.sent
		}
	}
	if sent.IsZero() {
		c.mu.Unlock()
		c.wake()
		return
	}
	c.owner.Store(true)
	c.token = token
	c.grantedSeq = max(c.grantedSeq, seq)
	c.checkToken(token)
	c.mu.Unlock()
	c.grant(backend.Record{Owner: c.id, TTL: c.ttlDur, Transition: c.leaseDur, Token: token, Value: c.value}, sent)
}

// Lookup runs the lookup script, which reads the owner without contending.
func (c *contention) Lookup(ctx context.Context) (backend.Record, error) {
	if c.hold != nil {
		return c.lookupHold(ctx)
	}
	if err := c.b.usable(ctx); err != nil {
		return backend.Record{}, err
	}
	// A retriever that hears releases marks the mutex watched as it looks up, so that
	// releases with nobody waiting announce themselves; one that does not yet (a one-off
	// read, or a retriever whose subscription the server has yet to confirm, which looks
	// up again once it has) only reads. A server that refuses the write (out of memory, a
	// replica) still answers the read.
	watching := c.b.hub.hears(c.releases)
	var (
		v   any
		err error
	)
	if watching {
		v, err = c.b.scripts.run(ctx, watchScript, c.keys, watchedFor.Milliseconds()).Result()
	}
	if !watching || writeRefused(err) {
		v, err = c.b.scripts.run(ctx, lookupScript, c.keys).Result()
	}
	if err != nil {
		return backend.Record{}, c.b.storeError(ctx, "lookup", err)
	}
	a, err := parseAnswer(v)
	if err != nil {
		return backend.Record{}, wrap("lookup", err)
	}
	return c.record(a, 0), nil
}

// OthersWaiting reports whether the waiting set holds a contender other than this one
// that is still waiting, dropping the gone ones it finds on the way (see waiting.lua). It
// may say yes for a waiter that died moments ago; never no when someone waits.
func (c *contention) OthersWaiting(ctx context.Context) (bool, error) {
	if c.hold != nil {
		return c.othersWaitingHold(ctx)
	}
	if err := c.b.usable(ctx); err != nil {
		return false, err
	}
	n, err := c.b.scripts.run(ctx, waitingScript, c.keys, c.id, c.b.exact).Int()
	if err != nil {
		return false, c.b.storeError(ctx, "read the waiting set", err)
	}
	return n == 1, nil
}

// StopContend stops routing messages to the contention; the backend's subscription
// goroutine unsubscribes the channels no other contention needs. It does no I/O itself,
// so it returns at once even when the server does not answer, unless an acquire call of
// the contention went unanswered: then, within ctx, it records the stop and releases a
// tenure that call may have begun (stopUnanswered).
func (c *contention) StopContend(ctx context.Context) error {
	if c.unanswered {
		c.stopUnanswered(ctx)
	}
	if c.forget != nil {
		c.forget()
	}
	if c.joined {
		c.joined = false
		c.b.hub.leave(c)
	}
	if c.id != "" && c.listed == unlisted {
		c.b.unlisted.add(c.mutex, c.id)
	}
	return nil
}

// stopUnanswered records the stop of a contention an acquire call of which went
// unanswered (stop.lua): that call, should it reach the server later, takes nothing;
// without the record it would take a free mutex (or permit) for a contender that has
// stopped, held until its lease lapsed. A call that arrived after the contention's release
// and before the record took it already: a tenure of the contender ID newer than any the
// contention heard of, which is released. A failure leaves the risk, as before.
func (c *contention) stopUnanswered(ctx context.Context) {
	var held string
	var err error
	if c.hold != nil {
		held, err = c.b.scripts.run(ctx, holdsStopScript, c.hold.keys, c.nonces, c.hold.mode, stoppedFor.Milliseconds(), c.id).Text()
	} else {
		held, err = c.b.scripts.run(ctx, stopScript, c.keys, c.nonces, stoppedFor.Milliseconds(), c.id).Text()
	}
	if err == nil && held != "" {
		err = c.releaseUnheard(ctx, held)
	}
	if err != nil {
		c.log.Debug("simba/redis: stopping after an unanswered acquire call failed", "err", err)
	}
}

// releaseUnheard releases the tenure (or hold) whose token is held, which the contender ID
// has, when it is newer than every token the contention heard of.
func (c *contention) releaseUnheard(ctx context.Context, held string) error {
	tok, err := strconv.ParseUint(held, 10, 64)
	if err != nil || tok == 0 {
		return err // '0': a tenure whose token the store does not show, which no Go call began
	}
	c.mu.Lock()
	known := c.lastToken
	c.mu.Unlock()
	if tok <= known {
		return nil // one it heard of: the service releases it, or has
	}
	if c.hold != nil {
		return c.b.scripts.run(ctx, holdsReleaseHolderScript, c.hold.keys, c.id, c.hold.mode, held).Err()
	}
	return c.b.scripts.run(ctx, releaseScript, c.keys, c.id, string(unlisted), c.b.exact, "", held).Err()
}

// record turns the answer to the acquire call with nonce number seq (0: none) into a
// backend.Record of durations (see the package doc, Clock).
func (c *contention) record(a answer, seq uint64) backend.Record {
	mine := c.id != "" && a.owner == c.id
	c.mu.Lock()
	defer c.mu.Unlock()
	if !mine && seq != 0 && seq <= c.grantedSeq {
		// Another owner, named to a call sent no later than the attempt a grant answered:
		// older than the grant, so passed on (simba drops it) but changing nothing here.
		return c.durations(a, a.token)
	}
	c.owner.Store(mine)
	if a.owner == "" {
		c.token = 0
		return backend.Record{}
	}
	tok := a.token
	if mine {
		if tok == 0 {
			tok = c.token // the token key is gone (evicted, or expired early): keep the tenure's
		}
		c.token = tok
	} else {
		c.token = 0
	}
	c.checkToken(tok)
	return c.durations(a, tok)
}

// durations returns the record of an answer with token tok.
func (c *contention) durations(a answer, tok uint64) backend.Record {
	if a.owner == "" {
		return backend.Record{}
	}
	left := a.left
	if left < 0 {
		left = c.leaseDur // a key without expiry, set by hand: as long as one lease of ours
	}
	value := a.value
	if a.owner == c.id && c.id != "" {
		value = c.value // its tenure's, whose token the answer may not show (the token key lapsed)
	}
	return backend.Record{Owner: a.owner, TTL: left - c.transition, Transition: left, Token: tok, Value: value}
}

// checkToken notices a token smaller than the last one this contention saw: tokens of
// one mutex never go backwards unless the store lost what keeps them increasing. Called
// with c.mu held.
func (c *contention) checkToken(tok uint64) {
	if tok == 0 {
		return
	}
	if tok < c.lastToken {
		c.b.regressions.Add(1)
		c.log.Error("simba/redis: fencing token went backwards: the token key was lost while the Redis server's clock was behind an earlier tenure's start",
			"token", tok, "previous_token", c.lastToken)
	}
	c.lastToken = tok
}

// channels returns the channels the contention listens on: a Locker's waiter leaves
// simba:{mutex} out until it renews as the owner (see the package doc, Subscriptions).
// An array, which the caller ranges over without allocating. Called by the method calls
// only.
func (c *contention) channels() (chs [3]string, n int) {
	switch {
	case c.hold != nil:
		return [3]string{c.hold.channel}, 1
	case c.inbox == "":
		return [3]string{c.key, c.releases}, 2
	case c.waitsOnly && !c.takeovers:
		return [3]string{c.releases, c.inbox}, 2
	default:
		return [3]string{c.key, c.releases, c.inbox}, 3
	}
}

// join has the backend subscribe the contention's channels, in the background.
func (c *contention) join() {
	c.joined = true
	c.b.hub.join(c)
}

// resync reacts to a subscription confirmed after messages may have been missed: a waiter
// contends and a retriever looks up at once; an owner waits for its next renewal.
func (c *contention) resync() {
	if c.id != "" && c.owner.Load() {
		// It subscribes as it renews, and a missed message could only have told it of a
		// takeover that its next renewal finds all the same (at 10,000 owners, the first
		// renewal would otherwise come twice, in one burst).
		return
	}
	c.wake()
}

// hint reacts to a message on one of the contention's channels (see the package doc,
// Subscriptions).
func (c *contention) hint(channel string, m message) {
	switch {
	case c.hold != nil:
		c.hintHold(m)
	case c.id == "":
		c.wake() // a retriever looks up whatever it hears
	case m.event == granted && c.grant != nil:
		c.granted(m.nonce, m.token)
	case channel == c.releases:
		if m.id == c.id {
			return // its own release: a contender that gave the mutex back lets the woken take it
		}
		if m.woken == "" || m.woken == c.id || c.owner.Load() {
			c.wake()
			return
		}
		c.observe(backend.Record{}) // the waiter it woke takes the mutex next
	case m.event == released || m.event == granted:
		c.wake() // addressed to this waiter, or broadcast by another client
	case m.event == acquired && m.id != c.id:
		if c.owner.Load() {
			c.wake() // someone else acquired while this contender believes it owns: check now
			return
		}
		// News of another owner while waiting: instants estimated from this contender's
		// own ttl and transition (as JVM Simba does), no token, no store call.
		c.observe(backend.Record{Owner: m.id, TTL: c.ttlDur, Transition: c.leaseDur})
	}
}

// observe tells a waiting contender's service whom a message names as the owner; the
// next answer of the store replaces it. Nothing is reported while the last answer named
// this contender: only the store ends a tenure.
func (c *contention) observe(rec backend.Record) {
	if c.report == nil {
		return
	}
	// c.mu orders the report with the answers: one that names this contender is never
	// overtaken by it.
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.owner.Load() {
		c.report(rec, time.Now())
	}
}

// storeError wraps an error of a store call, named op ("" when the service names it, as
// it does a release). redis.Nil never escapes; a refusal (see refuses) also matches
// ErrRefused, and when ctx has ended, the error also wraps ctx.Err() (go-redis reports a
// missed deadline as a network timeout). The mutex is not named: the service's errors and
// log lines carry it.
func (b *Backend) storeError(ctx context.Context, op string, err error) error {
	b.unanswered(err)
	if errors.Is(err, goredis.Nil) {
		err = fmt.Errorf("%w: nil", ErrUnexpectedReply)
	}
	if refuses(b.client, err) {
		what := "server refused the client"
		if op != "" {
			what = op + ": " + what
		}
		return failure(ctx, what, err, ErrRefused)
	}
	return failure(ctx, op, err, nil)
}
