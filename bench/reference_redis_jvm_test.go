package main

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// openReferenceJVM opens n clients of the JVM-format reference lock on one new mutex.
func openReferenceJVM(ctx context.Context, t *testing.T, e *env, n int) (string, []*referenceClient) {
	t.Helper()
	lib := referenceRedisJVM()
	mutex := e.mutex("test", lib.id)
	clients := make([]*referenceClient, n)
	for i := range clients {
		c, err := lib.open(ctx, e, mutex, openOptions{})
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = c.(*referenceClient)
		t.Cleanup(func() { _ = c.close() })
	}
	return mutex, clients
}

// TestReferenceJVMExcludes: clients taking turns on one mutex are never two inside, and
// every tenure's token exceeds the one before.
func TestReferenceJVMExcludes(t *testing.T) {
	e := serverEnv(t, storeRedis)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, clients := openReferenceJVM(ctx, t, e, 4)
	var inside atomic.Int32
	var last atomic.Uint64
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() {
			for range 100 {
				release, err := c.acquire(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				if n := inside.Add(1); n != 1 {
					t.Errorf("%d holders at once", n)
				}
				token := c.token.Load()
				if prev := last.Swap(token); token <= prev {
					t.Errorf("token %d after %d", token, prev)
				}
				inside.Add(-1)
				if err := release(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestReferenceJVMFirstComeInJVMFormat: a release grants the mutex to the oldest waiter,
// and a JVM Simba contender reads the owner and the waiters where it keeps its own
// (simba:{mutex} with a lease's PX, simba:{mutex}:contender in order of arrival) and hears
// each acquisition on simba:{mutex}.
func TestReferenceJVMFirstComeInJVMFormat(t *testing.T) {
	e := serverEnv(t, storeRedis)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	mutex, c := openReferenceJVM(ctx, t, e, 4)
	owner, queue := "simba:{"+mutex+"}", "simba:{"+mutex+"}:contender"
	heard := e.redis.Subscribe(ctx, owner)
	defer heard.Close()
	if _, err := heard.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	jvmSees := func(holder *referenceClient, waiters ...*referenceClient) {
		t.Helper()
		if got, err := e.redis.Get(ctx, owner).Result(); err != nil || got != holder.id {
			t.Fatalf("GET %s = %q, %v; want %q", owner, got, err, holder.id)
		}
		if px, err := e.redis.PTTL(ctx, owner).Result(); err != nil || px <= 0 || px > lockTTL {
			t.Fatalf("PTTL %s = %v, %v; want within (0, %v]", owner, px, err, lockTTL)
		}
		var want []string
		for _, w := range waiters {
			want = append(want, w.id)
		}
		if got, err := e.redis.ZRange(ctx, queue, 0, -1).Result(); err != nil || !slices.Equal(got, want) {
			t.Fatalf("ZRANGE %s = %q, %v; want %q", queue, got, err, want)
		}
		m, err := heard.ReceiveMessage(ctx)
		if err != nil || m.Payload != "acquired@@"+holder.id {
			t.Fatalf("on %s: %v, %v; want acquired@@%s", owner, m, err, holder.id)
		}
	}

	releaseFirst, err := c[0].acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type granted struct {
		c       *referenceClient
		release func(context.Context) error
	}
	got := make(chan granted, len(c))
	var wg sync.WaitGroup
	defer func() {
		cancel() // the waiters of a test that failed
		wg.Wait()
	}()
	for _, w := range c[1:] {
		wg.Go(func() {
			release, err := w.acquire(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			got <- granted{w, release}
		})
		if err := waitFor(ctx, 30*time.Second, time.Millisecond, w.id+" waiting", w.waiting); err != nil {
			t.Fatal(err)
		}
	}
	jvmSees(c[0], c[1:]...)
	release, tokens := releaseFirst, []uint64{c[0].token.Load()}
	for i := 1; i < len(c); i++ {
		if err := release(ctx); err != nil {
			t.Fatal(err)
		}
		var g granted
		select {
		case g = <-got:
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
		if g.c != c[i] {
			t.Fatalf("release %d granted %s; want %s, the oldest waiter", i, g.c.id, c[i].id)
		}
		jvmSees(g.c, c[i+1:]...)
		tokens = append(tokens, g.c.token.Load())
		release = g.release
	}
	if err := release(ctx); err != nil {
		t.Fatal(err)
	}
	if !slices.IsSorted(tokens) || len(slices.Compact(slices.Clone(tokens))) != len(tokens) {
		t.Errorf("tokens %v: not strictly increasing", tokens)
	}
}

// TestReferenceJVMTokenSurvivesEmptyRestart: a tenure's token exceeds the previous
// tenure's after the store lost every key (FLUSHALL, as a Redis without persistence that
// restarts empty), and the previous token's after the clock stepped back.
func TestReferenceJVMTokenSurvivesEmptyRestart(t *testing.T) {
	e := serverEnv(t, storeRedis)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	mutex, c := openReferenceJVM(ctx, t, e, 1)
	tenure := func() uint64 {
		t.Helper()
		release, err := c[0].acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := release(ctx); err != nil {
			t.Fatal(err)
		}
		return c[0].token.Load()
	}
	first, second := tenure(), tenure()
	if second <= first {
		t.Fatalf("token %d after %d", second, first)
	}
	if err := e.redis.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if third := tenure(); third <= second {
		t.Fatalf("token %d after FLUSHALL, %d before", third, second)
	}
	// A previous token ahead of the server's clock (the clock stepped back): the next is
	// that + 1.
	ahead := uint64(time.Now().Add(time.Hour).UnixMicro())
	if err := e.redis.Set(ctx, "reference:{"+mutex+"}:token", strconv.FormatUint(ahead, 10), time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if next := tenure(); next != ahead+1 {
		t.Fatalf("token %d after %d", next, ahead)
	}
}

// A JVM Simba contender's two scripts, as the JVM-format reference lock must serve them:
// acquire (SET NX PX and its message, else ZADD NX in whole seconds) and release (DEL,
// the oldest waiter off the waiting set and "released@@<id>" on its channel).
var (
	jvmAcquire = goredis.NewScript(`
if redis.call('set', KEYS[1], ARGV[1], 'nx', 'px', ARGV[2]) then
  redis.call('publish', KEYS[1], 'acquired@@' .. ARGV[1])
  return 1
end
redis.call('zadd', KEYS[2], 'nx', redis.call('time')[1], ARGV[1])
return 0
`)
	jvmRelease = goredis.NewScript(`
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('del', KEYS[1])
local next = redis.call('zpopmin', KEYS[2])[1]
if next then
  redis.call('publish', KEYS[1] .. ':' .. next, 'released@@' .. ARGV[1])
end
return 1
`)
)

// TestReferenceJVMServesJVMWaiter: a JVM Simba waiter that is the oldest is woken JVM
// Simba's way (the owner key deleted, "released@@<owner>" on its channel), not granted the
// mutex it would not know it owns, and its release, JVM Simba's, lets the reference's
// waiter behind it take the mutex.
func TestReferenceJVMServesJVMWaiter(t *testing.T) {
	e := serverEnv(t, storeRedis)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	mutex, c := openReferenceJVM(ctx, t, e, 2)
	keys := []string{"simba:{" + mutex + "}", "simba:{" + mutex + "}:contender"}
	const j = "0:1@jvm"
	jvm := e.redis.Subscribe(ctx, keys[0]+":"+j)
	defer jvm.Close()
	if _, err := jvm.Receive(ctx); err != nil {
		t.Fatal(err)
	}

	release, err := c[0].acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if took, err := jvmAcquire.Run(ctx, e.redis, keys, j, "10000").Int(); err != nil || took != 0 {
		t.Fatalf("JVM acquire of an owned mutex: %d, %v", took, err)
	}
	got := make(chan error, 1)
	go func() {
		r, err := c[1].acquire(ctx)
		if err == nil {
			err = r(ctx)
		}
		got <- err
	}()
	if err := waitFor(ctx, 30*time.Second, time.Millisecond, "the second client waiting", c[1].waiting); err != nil {
		t.Fatal(err)
	}
	if err := release(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := jvm.ReceiveMessage(ctx)
	if err != nil || m.Payload != "released@@"+c[0].id {
		t.Fatalf("the JVM waiter heard %v, %v; want released@@%s", m, err, c[0].id)
	}
	if took, err := jvmAcquire.Run(ctx, e.redis, keys, j, "10000").Int(); err != nil || took != 1 {
		t.Fatalf("the woken JVM waiter's acquire: %d, %v; want 1", took, err)
	}
	if released, err := jvmRelease.Run(ctx, e.redis, keys, j).Int(); err != nil || released != 1 {
		t.Fatalf("JVM release: %d, %v", released, err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	if n := c[1].giveUps(); n != 0 {
		t.Errorf("the waiter behind the JVM one asked again %d times on its own: the JVM release did not wake it", n)
	}
}
