package redis_test

import (
	"context"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/tck"
)

// deploymentScale stretches the conformance suite's durations (TTL 1.5s, call timeout 375ms)
// on the deployments of several servers (Sentinel, Cluster, a quorum), which share the
// test machine with the rest of the suite: in CI, where every core is busy, a renewal of
// the suite's 1s TTL failed for longer than its 333ms lead on Sentinel and ended a
// tenure the guard check expected to last.
const deploymentScale = 1.5

// The conformance suite against one redis-server; every backend has a client of its own,
// as separate processes would.
func TestConformance(t *testing.T) {
	srv := server(t)
	admin := newClient(t, srv.Addr())
	t.Cleanup(func() {
		for _, pattern := range residuePatterns {
			assertNoResidue(t, admin, pattern)
		}
	})
	tck.Run(t, func(t *testing.T) simba.Backend {
		return newBackend(t, newClient(t, srv.Addr()))
	})
}

// residuePatterns match the keys and channels of the suite's mutexes, semaphores and
// read-write locks.
var residuePatterns = []string{"simba:{tck-*", "simba:sem:{tck-*", "simba:rw:{tck-*"}

// assertNoResidue checks, once every check has stopped and closed its backends, that the
// store keeps nothing but a mutex's slot record and expiring keys that outlive what they
// fence or record (a mutex's token key, retrievers' mark and stopped contentions, a
// semaphore's or read-write lock's keys) and that no channel is subscribed. The keys of a
// hold name live up to a lease past its last hold or waiter (its fence does): those are
// waited out, up to the event deadline.
func assertNoResidue(t *testing.T, admin goredis.UniversalClient, pattern string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*eventDeadline)
	defer cancel()
	deadline := time.Now().Add(eventDeadline)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var lasting []string // hold keys that have yet to expire
		keys, err := admin.Keys(ctx, pattern).Result()
		require.NoError(t, err)
		for _, k := range keys {
			hold := strings.HasPrefix(k, "simba:sem:") || strings.HasPrefix(k, "simba:rw:")
			if strings.HasSuffix(k, ":slot") && !hold {
				continue // a Scheduler's slot record, kept for good
			}
			// Records that expire by themselves: a mutex's token, a retriever's mark, a
			// stopped contention's record (of a mutex or a hold name).
			record := strings.HasSuffix(k, ":token") || strings.HasSuffix(k, ":retrievers") || strings.HasSuffix(k, ":stopped")
			if !hold && !record {
				assert.Failf(t, "residue", "key %s left on the store", k)
				continue
			}
			ttl, err := admin.PTTL(ctx, k).Result()
			require.NoError(t, err)
			switch {
			case ttl == -2*time.Nanosecond: // expired since KEYS
			case ttl < 0:
				assert.Failf(t, "residue", "key %s left on the store without expiry", k)
			case hold && !record:
				lasting = append(lasting, k)
			}
		}
		if len(lasting) == 0 {
			break
		}
		if time.Now().After(deadline) {
			assert.Failf(t, "residue", "keys still on the store %v after the suite: %v", eventDeadline, lasting)
			break
		}
		<-tick.C
	}
	channels, err := admin.PubSubChannels(ctx, pattern).Result()
	require.NoError(t, err)
	assert.Empty(t, channels, "channels still subscribed")
}
