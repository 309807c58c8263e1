package redis_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/internal/testserver"
	"github.com/simba-go/simba/tck"
)

// startCluster starts three cluster-enabled redis-servers on loopback, joins them into one
// cluster of three masters and returns their addresses.
func startCluster(t *testing.T) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var (
		nodes []*testserver.Server
		addrs []string
	)
	for range 3 {
		dir, err := os.MkdirTemp("", "simba-redis-cluster-")
		require.NoError(t, err)
		s, err := testserver.RedisClusterNode(dir)
		need(t, err)
		need(t, s.Start(ctx))
		t.Cleanup(func() {
			_ = s.Stop()
			_ = os.RemoveAll(dir)
		})
		nodes = append(nodes, s)
		addrs = append(addrs, s.Addr())
	}
	require.NoError(t, testserver.FormCluster(ctx, nodes...))
	return addrs
}

func newClusterClient(t testing.TB, addrs []string) *goredis.ClusterClient {
	c := goredis.NewClusterClient(&goredis.ClusterOptions{
		Addrs:                    addrs,
		DisableIdentity:          true,
		ContextTimeoutEnabled:    true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// The whole conformance suite through Cluster clients on a cluster of three masters. The
// suite's mutex names hash to slots on all three, and a waiter's subscription connection
// is often to another node than its mutex's keys: PUBLISH reaches every node.
func TestClusterConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster; skipped with -short")
	}
	addrs := startCluster(t)
	admin := newClusterClient(t, addrs)
	t.Cleanup(func() {
		// KEYS and PUBSUB CHANNELS are per node.
		ctx := context.Background()
		_ = admin.ForEachMaster(ctx, func(ctx context.Context, node *goredis.Client) error {
			for _, pattern := range residuePatterns {
				assertNoResidue(t, node, pattern)
			}
			return nil
		})
	})
	tck.Run(t, func(t *testing.T) simba.Backend {
		return newBackend(t, newClusterClient(t, addrs))
	}, tck.WithTimeScale(deploymentScale))
}

// Every key of a mutex is in the slot of its hash tag, whichever node serves it.
func TestClusterKeysShareOneSlot(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster; skipped with -short")
	}
	addrs := startCluster(t)
	client := newClusterClient(t, addrs)
	b := newBackend(t, client)
	ctx := t.Context()
	nodesUsed := map[string]bool{}
	for i := range 12 {
		mutex := "slot-" + strconv.Itoa(i)
		holder, err := simba.NewLocker(b, mutex, simba.WithContenderID("holder"))
		require.NoError(t, err)
		lease, err := holder.Acquire(ctx)
		require.NoError(t, err)
		waiter, err := simba.NewLocker(b, mutex, simba.WithContenderID("waiter"))
		require.NoError(t, err)
		_, err = waiter.TryAcquire(ctx) // records the waiter in the waiting set
		require.ErrorIs(t, err, simba.ErrNotAcquired)

		slot, err := client.ClusterKeySlot(ctx, "simba:{"+mutex+"}").Result()
		require.NoError(t, err)
		for _, k := range []string{"{" + mutex + "}", "simba:{" + mutex + "}:contender", "simba:{" + mutex + "}:token", "simba:{" + mutex + "}:slot"} {
			s, err := client.ClusterKeySlot(ctx, k).Result()
			require.NoError(t, err)
			assert.Equal(t, slot, s, "slot of %s", k)
		}
		node, err := client.MasterForKey(ctx, "simba:{"+mutex+"}")
		require.NoError(t, err)
		nodesUsed[node.Options().Addr] = true
		for _, k := range []string{"simba:{" + mutex + "}", "simba:{" + mutex + "}:token"} {
			n, err := node.Exists(ctx, k).Result()
			require.NoError(t, err)
			assert.EqualValues(t, 1, n, "%s on the node of its slot", k)
		}
		require.NoError(t, lease.Release(ctx))
	}
	assert.Len(t, nodesUsed, 3, "twelve names should spread over the three masters")
}

// When the primary of a mutex's slot dies and its replica takes the slot over, contention
// goes on within seconds (issue 16, item 3). go-redis's ClusterClient keeps dialing the
// dead primary until its periodic reload (every 60 s by default; go-redis issue #3979):
// the backend asks it to reload its slot map when a call fails without an answer.
func TestClusterFailoverOfTheSlotPrimary(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a six-node cluster; skipped with -short")
	}
	dir, err := os.MkdirTemp("", "simba-redis-cluster-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	cluster, err := testserver.NewRedisCluster(dir)
	need(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t.Cleanup(func() { _ = cluster.Stop() })
	need(t, cluster.Start(ctx))
	addrs := strings.Split(cluster.Addr(), ",")
	mutex := uniqueName(t, "m")

	owner := contend(t, newBackend(t, newClusterClient(t, addrs)), mutex, "owner", &wakes{})
	rec, err := owner.Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, "owner", rec.Owner)
	waiter := contend(t, newBackend(t, newClusterClient(t, addrs)), mutex, "waiter", &wakes{})
	rec, err = waiter.Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, "owner", rec.Owner)

	slot, err := cluster.SlotOf(ctx, "simba:{"+mutex+"}")
	require.NoError(t, err)
	primary, err := cluster.Primary(ctx, slot)
	require.NoError(t, err)
	require.NoError(t, primary.Kill())
	_, err = cluster.AwaitPrimary(ctx, slot, primary)
	require.NoError(t, err)
	took := time.Now()

	// The owner's key, replicated, lapses after its TTL; the waiter then takes the mutex.
	const limit = 15 * time.Second
	var last error
	for time.Since(took) < limit {
		call, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
		rec, err = waiter.Acquire(call)
		cancel()
		if err == nil && rec.Owner == "waiter" {
			return
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the waiter did not acquire within %v of the failover (last error: %v)", limit, last)
}

// TestSlotBeingMovedKeepsOneOwner: while the slot of a mutex moves to another primary
// (the source MIGRATING, the target IMPORTING, the keys not yet moved), a contender's
// attempt must not run where the keys are not. The scripts declared only '{mutex}', a key
// that never exists, so the source redirected every one of them to the target (ASK), which
// has none of the mutex's keys yet and handed the mutex to a second owner (chaos
// redis-cluster/36 under load: two owners for 617 ms, then MIGRATE failed on BUSYKEY).
func TestSlotBeingMovedKeepsOneOwner(t *testing.T) {
	ctx := t.Context()
	addrs := startCluster(t)
	mutex := "slot-moving"
	owner := contend(t, newBackend(t, newClusterClient(t, addrs)), mutex, "owner", &wakes{})
	rec, err := owner.Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, "owner", rec.Owner)

	admin := newClusterClient(t, addrs)
	slot := int(goredisSlot(t, admin, "simba:{"+mutex+"}"))
	var src, dst *goredis.Client
	for _, a := range addrs {
		c := goredis.NewClient(&goredis.Options{Addr: a, DisableIdentity: true,
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
		t.Cleanup(func() { _ = c.Close() })
		n, err := c.ClusterCountKeysInSlot(ctx, slot).Result()
		require.NoError(t, err)
		if n > 0 {
			src = c
		} else if dst == nil {
			dst = c
		}
	}
	require.NotNil(t, src, "the node with the mutex's keys")
	srcID, err := src.Do(ctx, "cluster", "myid").Text()
	require.NoError(t, err)
	dstID, err := dst.Do(ctx, "cluster", "myid").Text()
	require.NoError(t, err)
	require.NoError(t, dst.Do(ctx, "cluster", "setslot", slot, "importing", srcID).Err())
	require.NoError(t, src.Do(ctx, "cluster", "setslot", slot, "migrating", dstID).Err())
	t.Cleanup(func() { // the slot stays where it was
		_ = dst.Do(context.Background(), "cluster", "setslot", slot, "stable").Err()
		_ = src.Do(context.Background(), "cluster", "setslot", slot, "stable").Err()
	})

	other := contend(t, newBackend(t, newClusterClient(t, addrs)), mutex, "other", &wakes{})
	actx, cancel := context.WithTimeout(ctx, 2*time.Second)
	got, err := other.Acquire(actx)
	cancel()
	if err == nil {
		assert.NotEqual(t, "other", got.Owner, "a second owner while the slot moves")
	}
	n, err := dst.ClusterCountKeysInSlot(ctx, slot).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "keys of the mutex made on the slot's target before they moved there")
}

// goredisSlot returns the hash slot of key as the cluster computes it.
func goredisSlot(t *testing.T, c *goredis.ClusterClient, key string) int64 {
	t.Helper()
	slot, err := c.ClusterKeySlot(t.Context(), key).Result()
	require.NoError(t, err)
	return slot
}

// Through Cluster clients, on mutexes whose slots are on each of the three masters: a
// hand-off grants the named waiter, which hears it on a subscription that may be to
// another node, and a slot record lives on the node of the mutex's slot.
func TestClusterHandOffAndSlots(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster; skipped with -short")
	}
	addrs := startCluster(t)
	admin := newClusterClient(t, addrs)
	ctx := t.Context()
	nodesUsed := map[string]bool{}
	for i := range 6 {
		m := &handOffMutex{admin: admin, name: "handoff-" + strconv.Itoa(i),
			connect: func() goredis.UniversalClient { return newClusterClient(t, addrs) }}
		a, _, c, first := m.ownedWithTwoWaiting(t, "", "vb", "vc")
		waiters, err := a.offer().Waiters(ctx)
		require.NoError(t, err)
		assert.Equal(t, []backend.Waiter{{ID: "b", Value: "vb"}, {ID: "c", Value: "vc"}}, waiters)
		require.NoError(t, a.offer().HandOff(ctx, "c"))
		rec := c.granted(t)
		assert.Equal(t, "vc", rec.Value)
		assert.Greater(t, rec.Token, first.Token)
		assert.Equal(t, []string{"b", "a"}, waitingIDs(t, admin, m.name))

		r := c.LeaseContention.(backend.SlotRecorder)
		slot := backend.Slot{At: time.Now(), Token: rec.Token}
		ok, err := r.ClaimSlot(ctx, slot)
		require.NoError(t, err)
		assert.True(t, ok)
		ok, err = a.LeaseContention.(backend.SlotRecorder).ClaimSlot(ctx, slot)
		require.NoError(t, err)
		assert.False(t, ok, "a retry")
		last, err := r.LastSlot(ctx)
		require.NoError(t, err)
		assert.True(t, last.At.Equal(slot.At))
		assert.Equal(t, slot.Token, last.Token)
		node, err := admin.MasterForKey(ctx, "simba:{"+m.name+"}")
		require.NoError(t, err)
		nodesUsed[node.Options().Addr] = true
		assert.EqualValues(t, 1, node.Exists(ctx, "simba:{"+m.name+"}:slot").Val(), "on the node of the mutex's slot")
	}
	assert.Len(t, nodesUsed, 3, "six names should spread over the three masters")
}
