package redis

import (
	"context"
	_ "embed" // the Lua script
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/batch"
)

//go:embed renew_many.lua
var renewManyLua string

// renewManyScript renews many mutexes in one call: the prelude and the guard script, as a
// function called once per mutex (see renew_many.lua).
var renewManyScript = &script{
	name: "renew_many",
	eval: goredis.NewScript("local function guard(KEYS, ARGV)\n" + withPrelude(guardLua) + "\nend\n" + renewManyLua),
	code: "local function guard(KEYS, ARGV)\n" + withNames(guardLua) + "\nend\n" + renewManyLua,
}

// How renewals are gathered into one call. simba has the owners of every mutex renew at
// the same instants (its renewal grid), so the renewals of one instant reach the
// backend within milliseconds of each other, however many mutexes the process holds.
const (
	// renewGap: a batch is sent once no renewal has come for this long...
	renewGap = 2 * time.Millisecond
	// renewLinger: ... or once its first has waited this long, or half of what is left
	// to any renewal's deadline, if less...
	renewLinger = 50 * time.Millisecond
	// maxRenewBatch: ... or once it holds this many renewals: a script blocks the server
	// while it runs (1,000 renewals took 27-40 ms on a loaded 2-core machine).
	maxRenewBatch = 1000
)

// renewals sends the renewals of a backend's contentions, those that arrive together,
// in one call of renewManyScript, from one goroutine that runs while renewals wait and is
// joined by close. Only a standalone or Sentinel client has one: on a Cluster, the keys
// of one call must share a hash slot, which the mutexes of one instant seldom do.
type renewals struct {
	scripts *runner
	calls   *batch.Queue[*renewal]
}

// renewal is one contention's renewal, waiting for its batch.
type renewal struct {
	ctx       context.Context
	keys      keyList
	id, lease string
	sendBy    time.Time    // its batch goes no later than this
	done      chan renewed // capacity 1: the reply, or why there is none
}

// renewed is the reply of one renewal: its guard call's reply, or an error.
type renewed struct {
	v   any
	err error
}

func newRenewals(scripts *runner) *renewals {
	q := &renewals{scripts: scripts}
	q.calls = batch.NewQueue(batch.Options[*renewal]{
		Gap: renewGap, Max: maxRenewBatch,
		Send:   q.send,
		Fail:   func(r *renewal, err error) { r.done <- renewed{err: err} },
		Closed: fmt.Errorf("simba/redis: %w", simba.ErrClosed),
	})
	return q
}

// renew renews c's tenure in the next batch and returns its guard call's reply. It
// returns ctx's error as soon as ctx ends: the reply, if it comes, is dropped, as a reply
// lost on the way would be.
func (q *renewals) renew(ctx context.Context, c *contention) (any, error) {
	r := newRenewal(ctx, c, time.Now())
	if err := q.calls.Add(r); err != nil {
		return nil, err
	}
	select {
	case got := <-r.done:
		return got.v, got.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// newRenewal returns c's renewal, arrived at now, for a caller whose context is ctx.
func newRenewal(ctx context.Context, c *contention, now time.Time) *renewal {
	r := &renewal{ctx: ctx, keys: c.keys, id: c.id, lease: c.lease, sendBy: now.Add(renewLinger), done: make(chan renewed, 1)}
	if d, ok := ctx.Deadline(); ok && d.Sub(now)/2 < renewLinger {
		r.sendBy = now.Add(d.Sub(now) / 2)
	}
	return r
}

// Context and SendBy make a renewal a batch.Call.
func (r *renewal) Context() context.Context { return r.ctx }
func (r *renewal) SendBy() time.Time        { return r.sendBy }

// send renews batch in one call, within ctx (ended by the latest of its renewals'
// deadlines, and by close), and hands each renewal its reply.
func (q *renewals) send(ctx context.Context, batch []*renewal) {
	per := len(batch[0].keys)
	keys := make(keyList, 0, per*len(batch))
	args := make([]any, 0, 1+2*len(batch))
	args = append(args, strconv.Itoa(per))
	for _, r := range batch {
		keys = append(keys, r.keys...)
		args = append(args, r.id, r.lease)
	}
	v, err := q.scripts.run(ctx, renewManyScript, keys, args...).Result()
	if err != nil && q.calls.Closing() {
		err = fmt.Errorf("simba/redis: %w", simba.ErrClosed)
	}
	replies, ok := v.([]any)
	if err == nil && (!ok || len(replies) != len(batch)) {
		err = fmt.Errorf("%w: %d replies to %d renewals", ErrUnexpectedReply, len(replies), len(batch))
	}
	for i, r := range batch {
		if err != nil {
			r.done <- renewed{err: err}
			continue
		}
		r.done <- oneReply(replies[i])
	}
}

// oneReply returns one renewal's part of renewManyScript's reply: its guard call's, or
// the error that call met.
func oneReply(v any) renewed {
	if list, ok := v.([]any); ok && len(list) == 1 {
		if msg, ok := list[0].(string); ok {
			return renewed{err: scriptError(msg)}
		}
	}
	return renewed{v: v}
}

// scriptError is a server's error reply to one mutex's part of a call: a goredis.Error,
// as the reply to a call of its own would be.
type scriptError string

func (e scriptError) Error() string { return string(e) }
func (scriptError) RedisError()     {}

// close fails the renewals waiting and those of the call in flight with an error wrapping
// simba.ErrClosed, and waits for the goroutine to end.
func (q *renewals) close() { q.calls.Close() }
