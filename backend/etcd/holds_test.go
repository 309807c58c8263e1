package etcd_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/etcd"
)

// The tests of semaphores and read-write locks beyond the conformance suite: the key
// layout, and the sequences that the suite does not force.

func newRWMutex(t *testing.T, b simba.Backend, name, id string) *simba.RWMutex {
	t.Helper()
	m, err := simba.NewRWMutex(b, name, simba.WithContenderID(id))
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func newSemaphore(t *testing.T, b simba.Backend, name string, permits int, id string) *simba.Semaphore {
	t.Helper()
	s, err := simba.NewSemaphore(b, name, permits, simba.WithContenderID(id))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// outcome is what an acquisition in the background returned.
type outcome struct {
	lease *simba.Lease
	err   error
}

// goAcquire runs acquire in the background; a lease it returns is released at the end.
func goAcquire(t *testing.T, acquire func(context.Context) (*simba.Lease, error)) <-chan outcome {
	out := make(chan outcome, 1)
	go func() {
		l, err := acquire(t.Context())
		out <- outcome{l, err}
	}()
	t.Cleanup(func() {
		select {
		case o := <-out:
			if o.lease != nil {
				_ = o.lease.Release(context.Background())
			}
		default:
		}
	})
	return out
}

// awaitWatching waits until contender id of b watches a key under prefix, and fails the
// test if done delivers first or nothing comes within eventBound.
func awaitWatching[T any](t *testing.T, b *testBackend, name, id, prefix string, done <-chan T, what string) {
	t.Helper()
	deadline := time.After(eventBound)
	for {
		if slices.ContainsFunc(etcd.Watched(b.Backend, name)[id], func(k string) bool { return strings.HasPrefix(k, prefix) }) {
			return
		}
		select {
		case <-done:
			t.Fatalf("%s: returned instead of waiting", what)
		case <-deadline:
			t.Fatalf("%s: watches %v after %v, want a key under %s", what, etcd.Watched(b.Backend, name)[id], eventBound, prefix)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// The layout: a semaphore's keys and markers under <prefix>/semaphore/<name>/<permits>/,
// a read-write lock's under <prefix>/rwlock/<name>/; a mutex of the same name is another
// thing, and neither shows among the mutexes.
func TestHoldKeyLayout(t *testing.T) {
	b := newBackend(t)
	s := newSemaphore(t, b, "jobs", 3, "s")
	m := newRWMutex(t, b, "jobs", "m")
	l := newLocker(t, b, "jobs", "l")
	permit, err := s.Acquire(t.Context())
	require.NoError(t, err)
	read, err := m.RLock(t.Context())
	require.NoError(t, err)
	lease, err := l.Acquire(t.Context())
	require.NoError(t, err)
	keys, _, revs := contenders(t, b.client, b.SemaphorePrefix("jobs"))
	require.Len(t, keys, 2)
	assert.True(t, strings.HasPrefix(keys[0], "simba//semaphore/jobs/3/q/"), keys[0])
	assert.True(t, strings.HasPrefix(keys[1], "simba//semaphore/jobs/3/h/"), keys[1])
	assert.Equal(t, uint64(revs[1]), permit.Token(), "a hold's token is its marker's create revision")
	marker := keys[1]
	fenced := func() bool {
		resp, err := b.client.Txn(t.Context()).If(etcd.FenceKey(marker, permit.Token())).Commit()
		require.NoError(t, err)
		return resp.Succeeded
	}
	assert.True(t, fenced(), "the marker fences while the permit is held")
	keys, _, revs = contenders(t, b.client, b.RWMutexPrefix("jobs"))
	require.Len(t, keys, 2)
	assert.True(t, strings.HasPrefix(keys[0], "simba//rwlock/jobs/r/"), keys[0])
	assert.True(t, strings.HasPrefix(keys[1], "simba//rwlock/jobs/hr/"), keys[1])
	assert.Equal(t, uint64(revs[1]), read.Token())
	names, err := b.Mutexes(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []string{"jobs"}, names, "the mutex only")
	for _, h := range []*simba.Lease{permit, read, lease} {
		require.NoError(t, h.Release(t.Context()))
	}
	assert.False(t, fenced(), "the marker fences no more once the permit is released")
	keys, _, _ = contenders(t, b.client, "simba/")
	assert.Empty(t, keys, "a release deletes the key and the marker")
}

// Curator's CURATOR-621, on etcd: a writer downgrades while a second writer waits. The
// downgraded read key is created after the second writer's, so once the first writer's
// key is gone the second writer's key is the first of the lock; it must still wait for
// the read hold, which it sees by its marker.
func TestDowngradeKeepsWaitingWriterOut(t *testing.T) {
	b1, b2 := newBackend(t), newBackend(t)
	m1, m2 := newRWMutex(t, b1, "ledger", "w1"), newRWMutex(t, b2, "ledger", "w2")
	w1, err := m1.Lock(t.Context())
	require.NoError(t, err)
	w2 := goAcquire(t, func(ctx context.Context) (*simba.Lease, error) {
		w, err := m2.Lock(ctx)
		if err != nil {
			return nil, err
		}
		return w.Lease, nil
	})
	dir := b1.RWMutexPrefix("ledger")
	awaitWatching(t, b2, "ledger", "w2/w#0", dir+"w/", w2, "the second writer")
	d, err := w1.Downgrade(t.Context())
	require.NoError(t, err)
	// The first writer's key is gone: the second writer wakes, and must wait for the read hold.
	awaitWatching(t, b2, "ledger", "w2/w#0", dir+"hr/", w2, "the second writer beside the downgraded reader")
	require.NoError(t, d.Context().Err(), "the downgraded reader believes")
	require.NoError(t, d.Release(t.Context()))
	o := await(t, w2, "the second writer after the read hold")
	require.NoError(t, o.err)
	assert.Less(t, d.Token(), o.lease.Token(), "tokens grow in the order of the holds")
}

// A process that gives another permit count than the semaphore's holders is refused at
// once, and leaves no key behind.
func TestSemaphorePermitMismatchRefused(t *testing.T) {
	b1, b2 := newBackend(t), newBackend(t)
	two := newSemaphore(t, b1, "pool", 2, "two")
	permit, err := two.Acquire(t.Context())
	require.NoError(t, err)
	three := newSemaphore(t, b2, "pool", 3, "three")
	ctx, cancel := context.WithTimeout(t.Context(), eventBound)
	defer cancel()
	_, err = three.Acquire(ctx)
	require.ErrorIs(t, err, simba.ErrRefused)
	assert.NoError(t, ctx.Err(), "refused at once, not by the deadline")
	assert.Contains(t, err.Error(), `semaphore "pool" has 2 permits, not 3`)
	keys, _, _ := contenders(t, b1.client, b1.SemaphorePrefix("pool"))
	assert.Len(t, keys, 2, "the holder's key and marker only")
	require.NoError(t, permit.Release(t.Context()))
	// Once nobody holds or waits, the name takes another count.
	p3, err := three.Acquire(t.Context())
	require.NoError(t, err)
	require.NoError(t, p3.Release(t.Context()))
}

// A holder whose lease is revoked (its process's lease expired on the server) loses its
// permit at once, and the waiter behind it is let in.
func TestSemaphoreRevokedHolderLetsNextIn(t *testing.T) {
	b1, b2 := newBackend(t), newBackend(t)
	s1, s2 := newSemaphore(t, b1, "slots", 1, "h"), newSemaphore(t, b2, "slots", 1, "w")
	h, err := s1.Acquire(t.Context())
	require.NoError(t, err)
	w := goAcquire(t, s2.Acquire)
	awaitWatching(t, b2, "slots", "w#0", b1.SemaphorePrefix("slots"), w, "the waiter")
	revoke(t, b1)
	await(t, h.Done(), "the holder's loss")
	assert.ErrorIs(t, context.Cause(h.Context()), simba.ErrOwnershipLost)
	o := await(t, w, "the waiter after the revoke")
	require.NoError(t, o.err)
	assert.Less(t, h.Token(), o.lease.Token())
}

// First come, first served with one wake per hand-over: the first waiter of a semaphore
// watches the places ahead of it, each later one only the waiter just ahead (its place and
// its marker); permits go in the order of the places, with growing tokens.
func TestSemaphoreHandOverByWatch(t *testing.T) {
	const name, n = "fifo", 4
	admin := newClient(t, server.Addr())
	var backends [n]*testBackend
	var sems [n]*simba.Semaphore
	for i := range n {
		backends[i] = newBackend(t)
		sems[i] = newSemaphore(t, backends[i], name, 1, fmt.Sprintf("c%d", i))
	}
	dir := backends[0].SemaphorePrefix(name) + "1/"
	first, err := sems[0].Acquire(t.Context())
	require.NoError(t, err)
	waits := make([]<-chan outcome, n)
	for i := 1; i < n; i++ {
		waits[i] = goAcquire(t, sems[i].Acquire)
		awaitKeys(t, admin, dir+"q/", i+1) // queued in this order
	}
	places, _, _ := contenders(t, admin, dir+"q/")
	marker := func(place string) string { return dir + "h/" + strings.TrimPrefix(place, dir+"q/") }
	wants := map[int][]string{1: {dir + "q/", places[1]}}
	for i := 2; i < n; i++ {
		wants[i] = []string{places[i-1], places[i], marker(places[i-1])}
		slices.Sort(wants[i])
	}
	for i := 1; i < n; i++ {
		id := fmt.Sprintf("c%d#0", i)
		deadline := time.Now().Add(eventBound) // the join's answer comes before its watches are set
		for !slices.Equal(etcd.Watched(backends[i].Backend, name)[id], wants[i]) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		assert.Equal(t, wants[i], etcd.Watched(backends[i].Backend, name)[id], "%s watches", id)
	}
	last := first
	for i := 1; i < n; i++ {
		require.NoError(t, last.Release(t.Context()))
		o := await(t, waits[i], fmt.Sprintf("c%d acquires", i))
		require.NoError(t, o.err)
		for j := i + 1; j < n; j++ {
			select {
			case o := <-waits[j]:
				t.Fatalf("c%d acquired (err %v) while c%d held the only permit", j, o.err, i)
			default:
			}
		}
		assert.Less(t, last.Token(), o.lease.Token(), "tokens grow")
		last = o.lease
	}
	require.NoError(t, last.Release(t.Context()))
}

// A waiter whose process is gone (its connections swallow everything) never keeps the
// live waiter behind it out: its place goes with its lease, and the permit goes on.
func TestSemaphoreDeadWaiterPassedOver(t *testing.T) {
	const name = "dead-waiter"
	admin := newClient(t, server.Addr())
	bh, bd, bw := newBackend(t), newBackend(t), newBackend(t)
	sh := newSemaphore(t, bh, name, 1, "h")
	sd, sw := newSemaphore(t, bd, name, 1, "d"), newSemaphore(t, bw, name, 1, "w")
	dir := bh.SemaphorePrefix(name) + "1/q/"
	h, err := sh.Acquire(t.Context())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	d := goAcquire(t, func(context.Context) (*simba.Lease, error) { return sd.Acquire(ctx) })
	awaitKeys(t, admin, dir, 2)
	w := goAcquire(t, sw.Acquire)
	awaitKeys(t, admin, dir, 3)
	bd.cut()
	require.NoError(t, h.Release(t.Context()))
	o := await(t, w, "the live waiter behind the dead one")
	require.NoError(t, o.err)
	assert.Less(t, h.Token(), o.lease.Token())
	cancel()
	await(t, d, "the dead waiter's acquisition, cancelled")
}

// A writer whose lease is revoked loses the lock at once, and the readers waiting behind
// it read together.
func TestRWRevokedWriterLetsReadersIn(t *testing.T) {
	const name = "revoked-writer"
	admin := newClient(t, server.Addr())
	bw, b1, b2 := newBackend(t), newBackend(t), newBackend(t)
	mw := newRWMutex(t, bw, name, "w")
	w, err := mw.Lock(t.Context())
	require.NoError(t, err)
	dir := bw.RWMutexPrefix(name) + "r/"
	r1 := goAcquire(t, newRWMutex(t, b1, name, "r1").RLock)
	awaitKeys(t, admin, dir, 1)
	r2 := goAcquire(t, newRWMutex(t, b2, name, "r2").RLock)
	awaitKeys(t, admin, dir, 2)
	revoke(t, bw)
	await(t, w.Done(), "the writer's loss")
	for i, r := range []<-chan outcome{r1, r2} {
		o := await(t, r, fmt.Sprintf("reader %d after the revoke", i+1))
		require.NoError(t, o.err)
		assert.Less(t, w.Token(), o.lease.Token())
		assert.NoError(t, o.lease.Context().Err(), "reader %d believes beside the other", i+1)
	}
}

// A waiter whose lease is lost while it waits joins again with a new place under its new
// lease, and is admitted on that place only: never on one that is gone.
func TestSemaphoreWaiterRejoinsAfterLeaseLoss(t *testing.T) {
	const name = "rejoin"
	admin := newClient(t, server.Addr())
	bh, bw := newBackend(t), newBackend(t)
	h, err := newSemaphore(t, bh, name, 1, "h").Acquire(t.Context())
	require.NoError(t, err)
	dir := bh.SemaphorePrefix(name) + "1/"
	w := goAcquire(t, newSemaphore(t, bw, name, 1, "w").Acquire)
	awaitKeys(t, admin, dir+"q/", 2)
	before, _ := bw.Lease()
	revoke(t, bw)
	deadline := time.Now().Add(eventBound)
	for {
		places, _, _ := contenders(t, admin, dir+"q/")
		if id, _ := bw.Lease(); id != 0 && id != before && len(places) == 2 {
			assert.Contains(t, places[1], fmt.Sprintf("%016x", uint64(id)), "the new place is under the new lease")
			break
		}
		require.True(t, time.Now().Before(deadline), "no new place within %v", eventBound)
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, h.Release(t.Context()))
	o := await(t, w, "the waiter on its new place")
	require.NoError(t, o.err)
	keys, _, revs := contenders(t, admin, dir+"h/")
	require.Len(t, keys, 1)
	id, _ := bw.Lease()
	assert.Contains(t, keys[0], fmt.Sprintf("%016x", uint64(id)))
	assert.Equal(t, uint64(revs[0]), o.lease.Token())
}
