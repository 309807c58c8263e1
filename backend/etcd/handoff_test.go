package etcd_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// queue starts contenders on backends of their own, in this order (each joins once the one
// before has its key), with the values given; the first owns the mutex.
func queue(t *testing.T, bs []*testBackend, mutex string, ids, values []string) []*contended {
	t.Helper()
	var cs []*contended
	for i, id := range ids {
		cs = append(cs, startContention(t, bs[i%len(bs)], mutex, id, values[i]))
		awaitKeys(t, bs[0].client, bs[0].MutexPrefix(mutex), i+1)
	}
	cs[0].owns(t, ids[0])
	return cs
}

// Waiters lists the contenders behind the owner, first come first, with their values.
func TestWaiters(t *testing.T) {
	b := newBackend(t)
	const mutex = "waiters"
	cs := queue(t, []*testBackend{b, newBackend(t), newBackend(t)}, mutex,
		[]string{"a", "b", "c"}, []string{"va", "vb", ""})
	for _, c := range cs {
		ws, err := as[backend.HandOffer](t, c).Waiters(t.Context())
		require.NoError(t, err)
		assert.Equal(t, []backend.Waiter{{ID: "b", Value: "vb"}, {ID: "c"}}, ws)
	}
}

// A hand-off deletes, in one transaction, the owner's key and the keys of the waiters
// ahead of to's: to's key is the lowest, and to, told by its watch on its predecessor, owns
// with its own token and value. The former owner and the waiters passed over join again,
// at the back; the waiters behind to keep their places.
func TestHandOff(t *testing.T) {
	testHandOff(t, []*testBackend{newBackend(t), newBackend(t), newBackend(t), newBackend(t)})
}

// The same on a cluster, each contender through a member of its own.
func TestHandOffCluster(t *testing.T) {
	eps := cluster(t).Endpoints()
	var bs []*testBackend
	for i := range 4 {
		bs = append(bs, newBackendAt(t, eps[i%len(eps):i%len(eps)+1]))
	}
	testHandOff(t, bs)
}

func testHandOff(t *testing.T, bs []*testBackend) {
	mutex := "handoff-" + t.Name()
	dir := bs[0].MutexPrefix(mutex)
	cs := queue(t, bs, mutex, []string{"a", "b", "c", "d"}, []string{"va", "vb", "vc", "vd"})
	a, b, c, d := cs[0], cs[1], cs[2], cs[3]
	_, _, revs := contenders(t, bs[0].client, dir)

	require.NoError(t, as[backend.HandOffer](t, a).HandOff(t.Context(), "c"))
	a.mu.Lock()
	assert.NotEqual(t, "a", a.last.Owner, "the former owner's view ends with the hand-off")
	a.mu.Unlock()
	rec := c.owns(t, "c")
	assert.Equal(t, "vc", rec.Value, "to's value")
	assert.Equal(t, uint64(revs[2]), rec.Token, "to's token is its key's create revision")
	assert.Greater(t, rec.Token, uint64(revs[0]), "a greater token than the former owner's")
	for _, w := range []*contended{a, b, d} {
		got := w.owns(t, "c")
		assert.Equal(t, rec.Token, got.Token)
		assert.Equal(t, "vc", got.Value)
	}

	// b, then a, wait again behind d, which kept its place.
	_, values, newRevs := contenders(t, bs[0].client, dir)
	assert.Equal(t, []string{"c\x00vc", "d\x00vd", "b\x00vb", "a\x00va"}, values)
	assert.Equal(t, revs[2:], newRevs[:2], "c's and d's keys are those they had")
	ws, err := as[backend.HandOffer](t, b).Waiters(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []backend.Waiter{{ID: "d", Value: "vd"}, {ID: "b", Value: "vb"}, {ID: "a", Value: "va"}}, ws)

	// c hands back to a, the last: d and b are passed over and wait again (in their order,
	// unless one of them joins by itself first), ahead of c.
	require.NoError(t, as[backend.HandOffer](t, c).HandOff(t.Context(), "a"))
	got := a.owns(t, "a")
	assert.Greater(t, got.Token, rec.Token)
	assert.Equal(t, "va", got.Value)
	for _, w := range []*contended{b, c, d} {
		w.owns(t, "a")
	}
	_, values, _ = contenders(t, bs[0].client, dir)
	require.Len(t, values, 4)
	assert.Equal(t, []string{"a\x00va", "c\x00vc"}, []string{values[0], values[3]})
	assert.ElementsMatch(t, []string{"d\x00vd", "b\x00vb"}, values[1:3])
	// Each contention took its new key as its own: when a leaves, the next owns.
	next := map[string]*contended{"d\x00vd": d, "b\x00vb": b}[values[1]]
	id, _, _ := strings.Cut(values[1], "\x00")
	require.NoError(t, a.StopContend(t.Context()))
	next.owns(t, id)
	c.owns(t, id)
}

// A hand-off whose checks fail changes nothing: one by a contender that does not own the
// mutex, one to a contender that does not wait.
func TestHandOffRefused(t *testing.T) {
	b := newBackend(t)
	const mutex = "handoff-refused"
	dir := b.MutexPrefix(mutex)
	cs := queue(t, []*testBackend{b, newBackend(t)}, mutex, []string{"a", "b"}, []string{"", ""})
	keys, _, revs := contenders(t, b.client, dir)

	err := as[backend.HandOffer](t, cs[1]).HandOff(t.Context(), "a")
	assert.ErrorIs(t, err, simba.ErrNotOwner, "a waiter hands off")
	err = as[backend.HandOffer](t, cs[0]).HandOff(t.Context(), "z")
	assert.ErrorIs(t, err, simba.ErrNotWaiting, "to a contender that does not contend")
	err = as[backend.HandOffer](t, cs[0]).HandOff(t.Context(), "a")
	assert.ErrorIs(t, err, simba.ErrNotWaiting, "to itself")
	retriever := startContention(t, b, mutex, "", "")
	err = as[backend.HandOffer](t, retriever).HandOff(t.Context(), "b")
	assert.ErrorIs(t, err, simba.ErrNotOwner, "a retriever hands off")

	after, _, afterRevs := contenders(t, b.client, dir)
	assert.Equal(t, keys, after)
	assert.Equal(t, revs, afterRevs)
	cs[0].owns(t, "a")

	// The owner's key went meanwhile (deleted by an operator): no hand-off.
	_, err = b.client.Delete(t.Context(), keys[0])
	require.NoError(t, err)
	err = as[backend.HandOffer](t, cs[0]).HandOff(t.Context(), "b")
	assert.ErrorIs(t, err, simba.ErrNotOwner, "an owner whose key is gone")
}

// A Locker's waiter passed over by a hand-off joins again at the back and goes on
// waiting: its acquisition returns once its new key owns.
func TestHandOffPassesOverALocker(t *testing.T) {
	b := newBackend(t)
	const mutex = "handoff-locker"
	dir := b.MutexPrefix(mutex)
	a := startContention(t, b, mutex, "a", "")
	a.owns(t, "a")
	waiting := acquire(t, newLocker(t, newBackend(t), mutex, "l"))
	awaitKeys(t, b.client, dir, 2)
	c := startContention(t, newBackend(t), mutex, "c", "")
	awaitKeys(t, b.client, dir, 3)

	require.NoError(t, as[backend.HandOffer](t, a).HandOff(t.Context(), "c"))
	c.owns(t, "c")
	require.NoError(t, a.StopContend(t.Context())) // a leaves, rather than joining again
	awaitKeys(t, b.client, dir, 2)
	_, values, _ := contenders(t, b.client, dir)
	assert.Equal(t, []string{"c", "l"}, values, "the Locker's waiter joined again behind c")
	select {
	case <-waiting:
		t.Fatal("the Locker acquired while c owns")
	default:
	}
	require.NoError(t, c.StopContend(t.Context()))
	lease := await(t, waiting, "the Locker acquires once c leaves")
	require.NotNil(t, lease)
	require.NoError(t, lease.Release(t.Context()))
}

// If to dies after the hand-off, its key goes with its lease, as any owner's: the next
// waiter owns.
func TestHandOffToADeadContender(t *testing.T) {
	b := newBackend(t)
	const mutex = "handoff-dead"
	dead := newBackend(t)
	cs := queue(t, []*testBackend{b, dead, newBackend(t)}, mutex, []string{"a", "c", "d"}, []string{"", "", ""})
	require.NoError(t, as[backend.HandOffer](t, cs[0]).HandOff(t.Context(), "c"))
	cs[2].owns(t, "c")
	revoke(t, dead)
	cs[2].owns(t, "d")
}

// A hand-off puts the keys of the waiters it passed over again, with their leases. A
// waiter that stops meanwhile may find its key gone, and the put come after its delete:
// its backend deletes the key again for a TTL, rather than leave it ahead of everyone
// until its lease ends. Here a contention that served its tenure (a Locker's: it does not
// join again) stops after its key was deleted, and the key is put again after the stop.
func TestKeyPutAgainAfterTheStopIsDeleted(t *testing.T) {
	b := newBackend(t)
	const mutex = "put-after-stop"
	dir := b.MutexPrefix(mutex)
	c := &contended{changed: make(chan struct{})}
	var err error
	c.Contention, err = b.StartContend(t.Context(), backend.Participant{
		Mutex: mutex, ContenderID: "l", TTL: testLeaseTTL, Transition: testLeaseTTL / 2,
		WaitsOnly: true, Wake: func() {}, Report: c.report,
	})
	require.NoError(t, err)
	c.owns(t, "l")
	keys, values, _ := contenders(t, b.client, dir)
	require.Len(t, keys, 1)
	got, err := b.client.Get(t.Context(), keys[0])
	require.NoError(t, err)
	lease := got.Kvs[0].Lease
	_, err = b.client.Delete(t.Context(), keys[0]) // as a hand-off that passes it over
	require.NoError(t, err)
	c.await(t, "the key seen gone", func(r backend.Record) bool { return r.Owner == "" })
	require.NoError(t, c.StopContend(t.Context()))
	_, err = b.client.Put(t.Context(), keys[0], values[0], clientv3.WithLease(clientv3.LeaseID(lease))) // the hand-off's put, late
	require.NoError(t, err)
	awaitKeys(t, b.client, dir, 0)
}
