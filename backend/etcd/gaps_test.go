package etcd_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/etcd"
)

// The tests of this file show, for each gap that users of etcd's concurrency package
// report, concurrency's behaviour and simba's on the same server.

// eventBound bounds the wait for an event that should come at once: generous, for a busy
// machine; it only fails a test that waits in vain.
const eventBound = 30 * time.Second

// await waits for ch to be closed or to deliver, or fails the test after eventBound.
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(eventBound):
		t.Fatalf("%s: nothing within %v", what, eventBound)
		var zero T
		return zero
	}
}

func newLocker(t *testing.T, b simba.Backend, mutex, id string) *simba.Locker {
	t.Helper()
	l, err := simba.NewLocker(b, mutex, simba.WithContenderID(id))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// acquire starts l.Acquire in the background and returns where its outcome will come.
func acquire(t *testing.T, l *simba.Locker) <-chan *simba.Lease {
	t.Helper()
	out := make(chan *simba.Lease, 1)
	go func() {
		lease, err := l.Acquire(t.Context())
		if err != nil {
			t.Errorf("Acquire of %s: %v", l.ContenderID(), err)
			close(out)
			return
		}
		out <- lease
	}()
	return out
}

// contenders returns the keys and values under dir in create order.
func contenders(t *testing.T, c *clientv3.Client, dir string) (keys, values []string, revs []int64) {
	t.Helper()
	resp, err := c.Get(t.Context(), dir, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	require.NoError(t, err)
	for _, kv := range resp.Kvs {
		keys, values, revs = append(keys, string(kv.Key)), append(values, string(kv.Value)), append(revs, kv.CreateRevision)
	}
	return keys, values, revs
}

// awaitKeys waits until dir holds n keys.
func awaitKeys(t *testing.T, c *clientv3.Client, dir string, n int) {
	t.Helper()
	deadline := time.Now().Add(eventBound)
	for {
		keys, _, _ := contenders(t, c, dir)
		if len(keys) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %d keys after %v, want %d", dir, len(keys), eventBound, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// revoke revokes b's lease from another client, as its expiry on the server would end it.
func revoke(t *testing.T, b *testBackend) {
	t.Helper()
	id, _ := b.Lease()
	require.NotZero(t, id, "the backend has a lease")
	_, err := newClient(t, server.Addr()).Revoke(t.Context(), id)
	require.NoError(t, err)
}

// The key format, the value and the token: the owner's key is the lowest create revision
// under <prefix><mutex>/, named after the backend's lease and the contention's number.
func TestKeyFormat(t *testing.T) {
	b := newBackend(t, etcd.WithPrefix("app/locks/"))
	l := newLocker(t, b, "orders", "worker-1")
	lease, err := l.Acquire(t.Context())
	require.NoError(t, err)
	keys, values, revs := contenders(t, b.client, "app/locks/orders/")
	require.Len(t, keys, 1)
	id, ttl := b.Lease()
	assert.Equal(t, testLeaseTTL, ttl, "the TTL the server granted")
	assert.Regexp(t, regexp.MustCompile(fmt.Sprintf(`^app/locks/orders/%016x-[0-9a-f]+$`, uint64(id))), keys[0])
	assert.Equal(t, "worker-1", values[0])
	assert.Equal(t, uint64(revs[0]), lease.Token(), "the token is the key's create revision")
	o, err := simba.Lookup(t.Context(), b, "orders")
	require.NoError(t, err)
	assert.Equal(t, "worker-1", o.ID)
	assert.Equal(t, lease.Token(), o.Token)
	require.NoError(t, lease.Release(t.Context()))
	keys, _, _ = contenders(t, b.client, "app/locks/orders/")
	assert.Empty(t, keys, "release deletes the key")
	names, err := b.Mutexes(t.Context())
	require.NoError(t, err)
	assert.NotContains(t, names, "orders")
}

// First come, first served: contenders own in the order their keys were put, each woken
// by a watch on the key just before its own only (no thundering herd), with tokens that
// increase.
func TestFIFOHandOverByWatch(t *testing.T) {
	const mutex, n = "fifo", 4
	admin := newClient(t, server.Addr())
	dir := etcd.DefaultPrefix + mutex + "/"
	backends := make([]*testBackend, n)
	results := make([]<-chan *simba.Lease, n)
	for i := range n {
		backends[i] = newBackend(t)
		results[i] = acquire(t, newLocker(t, backends[i], mutex, fmt.Sprintf("c%d", i)))
		awaitKeys(t, admin, dir, i+1) // joined in this order
	}
	keys, _, _ := contenders(t, admin, dir)
	for i := 2; i < n; i++ {
		// A waiter behind another waiter watches its predecessor and its own key, never
		// the owner's: a hand-over wakes one contender.
		want, id := sorted(keys[i-1], keys[i]), fmt.Sprintf("c%d", i)
		deadline := time.Now().Add(eventBound) // the join's answer comes before its watches are set
		for !slices.Equal(etcd.Watched(backends[i].Backend, mutex)[id], want) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		assert.Equal(t, want, etcd.Watched(backends[i].Backend, mutex)[id], "%s watches", id)
	}
	var last uint64
	for i := range n {
		lease := await(t, results[i], fmt.Sprintf("c%d acquires", i))
		require.NotNil(t, lease)
		for j := i + 1; j < n; j++ {
			select {
			case <-results[j]:
				t.Fatalf("c%d acquired before c%d released", j, i)
			default:
			}
		}
		assert.Greater(t, lease.Token(), last, "tokens increase")
		last = lease.Token()
		require.NoError(t, lease.Release(t.Context()))
	}
}

func sorted(a, b string) []string {
	if a > b {
		return []string{b, a}
	}
	return []string{a, b}
}

// concurrency's Session.Done is its only loss signal, and a Mutex or Election goes on
// "owning" after it. A simba tenure's context ends, with ErrOwnershipLost as its cause,
// as soon as the lease is lost: here revoked, long before its TTL (10s) would tell.
func TestLeaseLossEndsTenure(t *testing.T) {
	b := newBackend(t, etcd.WithLeaseTTL(10*time.Second))
	lease, err := newLocker(t, b, "loss", "holder").Acquire(t.Context())
	require.NoError(t, err)
	revoked := time.Now()
	revoke(t, b)
	await(t, lease.Done(), "the tenure context ends")
	t.Logf("tenure ended %v after the revoke", time.Since(revoked))
	assert.Less(t, time.Since(revoked), 10*time.Second, "ended by the key's deletion, not by the TTL")
	assert.ErrorIs(t, context.Cause(lease.Context()), simba.ErrOwnershipLost)
	assert.ErrorIs(t, lease.Release(t.Context()), simba.ErrOwnershipLost)
}

// concurrency's Election.Campaign does not abort when its session's lease is lost while
// it waits: its key is gone with the lease, and once the keys before it go, Campaign
// returns nil, a leader without a key (a phantom). simba's waiter joins again with a new
// key, and an acquisition returns only on a key that exists and owns the mutex.
func TestNoOwnerWithoutKeyAfterLeaseLoss(t *testing.T) {
	needServer(t)
	cli := newClient(t, server.Addr())
	t.Run("concurrency", func(t *testing.T) {
		leader, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
		require.NoError(t, err)
		defer leader.Close()
		waiter, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
		require.NoError(t, err)
		defer waiter.Close()
		e1 := concurrency.NewElection(leader, "campaign-gap/")
		require.NoError(t, e1.Campaign(t.Context(), "leader"))
		e2 := concurrency.NewElection(waiter, "campaign-gap/")
		campaigned := make(chan error, 1)
		go func() { campaigned <- e2.Campaign(t.Context(), "waiter") }()
		awaitKeys(t, cli, "campaign-gap/", 2)
		_, err = cli.Revoke(t.Context(), waiter.Lease()) // the waiter's session is lost
		require.NoError(t, err)
		require.NoError(t, e1.Resign(t.Context()))
		require.NoError(t, await(t, campaigned, "Campaign returns"))
		keys, _, _ := contenders(t, cli, "campaign-gap/")
		assert.Empty(t, keys, "concurrency: Campaign returned leadership, and no key of the waiter exists")
	})
	t.Run("simba", func(t *testing.T) {
		holder := newBackend(t)
		lease, err := newLocker(t, holder, "campaign-gap", "holder").Acquire(t.Context())
		require.NoError(t, err)
		wb := newBackend(t)
		waiting := acquire(t, newLocker(t, wb, "campaign-gap", "waiter"))
		dir := etcd.DefaultPrefix + "campaign-gap/"
		awaitKeys(t, cli, dir, 2)
		revoke(t, wb) // the waiter's lease, and its key, are lost
		require.NoError(t, lease.Release(t.Context()))
		got := await(t, waiting, "the waiter acquires")
		require.NotNil(t, got)
		keys, values, revs := contenders(t, cli, dir)
		require.Len(t, keys, 1, "simba: the waiter owns through a key that exists")
		assert.Equal(t, "waiter", values[0])
		assert.Equal(t, uint64(revs[0]), got.Token())
		assert.Greater(t, got.Token(), lease.Token())
		id, _ := wb.Lease()
		assert.Contains(t, keys[0], fmt.Sprintf("%016x", uint64(id)), "under the new lease")
		require.NoError(t, got.Release(t.Context()))
	})
}

// concurrency's Election.Observe never reports that nobody leads: after the leader
// resigns it sends nothing until the next leader. simba.Observe reports the zero Owner.
func TestObserveReportsNoOwner(t *testing.T) {
	b := newBackend(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	owners, err := simba.Observe(ctx, newBackend(t), "observed")
	require.NoError(t, err)
	next := func(want string) simba.Owner {
		t.Helper()
		deadline := time.After(eventBound)
		for {
			select {
			case o := <-owners:
				if o.ID == want {
					return o
				}
			case <-deadline:
				t.Fatalf("Observe did not report %q within %v", want, eventBound)
			}
		}
	}
	lease, err := newLocker(t, b, "observed", "holder").Acquire(t.Context())
	require.NoError(t, err)
	o := next("holder")
	assert.Equal(t, lease.Token(), o.Token)
	require.NoError(t, lease.Release(t.Context()))
	assert.True(t, next("").IsZero(), "no owner")
	look, err := simba.Lookup(t.Context(), b, "observed")
	require.NoError(t, err)
	assert.True(t, look.IsZero(), "Lookup: no owner")
}

// concurrency leaves fencing to the user. Fence gives the guard of a write to a resource
// kept in etcd: the owner key's create revision equals the token. A stale owner's write
// is rejected by etcd itself once its tenure is over, whatever it believes.
func TestFenceRejectsStaleOwner(t *testing.T) {
	a, b := newBackend(t, etcd.WithLeaseTTL(10*time.Second)), newBackend(t)
	admin := newClient(t, server.Addr())
	leaseA, err := newLocker(t, a, "fenced", "a").Acquire(t.Context())
	require.NoError(t, err)
	guardA, err := a.Fence(t.Context(), "fenced", leaseA.Token())
	require.NoError(t, err)
	write := func(guard clientv3.Cmp, v string) bool {
		t.Helper()
		resp, err := admin.Txn(t.Context()).If(guard).Then(clientv3.OpPut("resource", v)).Commit()
		require.NoError(t, err)
		return resp.Succeeded
	}
	require.True(t, write(guardA, "a1"), "the owner writes")
	waiting := acquire(t, newLocker(t, b, "fenced", "b"))
	revoke(t, a) // a's tenure ends on the store; a may not know yet
	leaseB := await(t, waiting, "b acquires")
	require.NotNil(t, leaseB)
	guardB, err := b.Fence(t.Context(), "fenced", leaseB.Token())
	require.NoError(t, err)
	assert.False(t, write(guardA, "a2"), "the stale owner's write is rejected")
	assert.True(t, write(guardB, "b1"), "the new owner's write is made")
	resp, err := admin.Get(t.Context(), "resource")
	require.NoError(t, err)
	assert.Equal(t, "b1", string(resp.Kvs[0].Value))
	// A guard asked for after the tenure ended: the key is gone.
	_, err = newBackend(t).Fence(t.Context(), "fenced", leaseA.Token())
	assert.ErrorIs(t, err, simba.ErrOwnershipLost)
	_, err = a.Fence(t.Context(), "fenced", 0)
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)
	_, err = a.Fence(t.Context(), "a/b", 1)
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)
}

// ReleaseOwner deletes the owner's key only while it is the key of the tenure looked up.
func TestReleaseOwner(t *testing.T) {
	b := newBackend(t, etcd.WithLeaseTTL(10*time.Second))
	lease, err := newLocker(t, b, "forced", "stuck").Acquire(t.Context())
	require.NoError(t, err)
	admin := newBackend(t)
	o, err := simba.Lookup(t.Context(), admin, "forced")
	require.NoError(t, err)
	stale := o
	stale.Token--
	require.NoError(t, admin.ReleaseOwner(t.Context(), "forced", stale))
	select {
	case <-lease.Done():
		t.Fatal("a release naming another tenure ended the owner's")
	default:
	}
	require.NoError(t, admin.ReleaseOwner(t.Context(), "forced", o))
	await(t, lease.Done(), "the owner sees its key go")
	o, err = simba.Lookup(t.Context(), admin, "forced")
	require.NoError(t, err)
	assert.True(t, o.IsZero())
	assert.ErrorIs(t, admin.ReleaseOwner(t.Context(), "forced", simba.Owner{}), simba.ErrInvalidArgument)
}
