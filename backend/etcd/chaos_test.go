package etcd_test

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/etcd"
	"github.com/simba-go/simba/internal/chaos"
	"github.com/simba-go/simba/internal/testserver"
)

// The fault suite's harness (internal/chaos) on a 3-member etcd cluster: contender
// processes behind fault proxies, a fenced referee, and the checker over their logs. The
// kit lives here because the root module, which holds the harness, does not depend on the
// etcd client. TestMain runs a contender process when the harness started one.
func init() {
	chaos.Register(chaos.Kit{
		Name:    "etcd",
		Letter:  "D",
		Server:  newChaosCluster,
		Backend: chaosBackend,
		Residue: chaosResidue,
		Owner:   chaosOwner,
	})
}

// chaosCluster is a 3-member cluster with fault proxies between its members, its data
// in memory (see memoryDir) and removed once it stopped.
type chaosCluster struct {
	*testserver.EtcdCluster
	data string
}

func newChaosCluster(string) (chaos.ServerProcess, error) {
	data, err := os.MkdirTemp(memoryDir(), "simba-etcd-chaos-")
	if err != nil {
		return nil, err
	}
	c, err := testserver.NewEtcdCluster(data, 3, testserver.EtcdOptions{PeerProxies: true})
	if err != nil {
		_ = os.RemoveAll(data)
		return nil, err
	}
	return &chaosCluster{EtcdCluster: c, data: data}, nil
}

func (c *chaosCluster) Stop() error {
	err := c.EtcdCluster.Stop()
	_ = os.RemoveAll(c.data)
	return err
}

// chaosBackend opens a backend whose lease has the contender's TTL, on a client of the
// endpoints of cfg.Addr (separated by commas).
func chaosBackend(_ context.Context, cfg chaos.ContenderConfig) (simba.Backend, func(), error) {
	client, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(cfg.Addr, ","), DialTimeout: 2 * time.Second,
		Logger: zap.NewNop()})
	if err != nil {
		return nil, nil, err
	}
	// Errors go to the process's stderr, which the harness keeps: 50_restart_wiped reads
	// there that the backend noticed the loss.
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	b, err := etcd.New(client, etcd.WithLeaseTTL(cfg.TTL), etcd.WithLogger(log))
	if err != nil {
		_ = client.Close()
		return nil, nil, err
	}
	return b, func() { _ = b.Close(); _ = client.Close() }, nil
}

// chaosKeys returns the keys under the prefixes of returns for a backend of the default
// layout, oldest first, read by a client of the harness's own on the endpoints of addr.
func chaosKeys(ctx context.Context, addr string, of func(*etcd.Backend) []string) ([]keyValue, error) {
	client, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(addr, ","), DialTimeout: 5 * time.Second,
		Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	defer client.Close()
	b, err := etcd.New(client)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	var kvs []keyValue
	for _, prefix := range of(b) {
		resp, err := client.Get(ctx, prefix, clientv3.WithPrefix())
		if err != nil {
			return nil, err
		}
		for _, kv := range resp.Kvs {
			kvs = append(kvs, keyValue{key: string(kv.Key), id: string(kv.Value), rev: kv.CreateRevision})
		}
	}
	slices.SortFunc(kvs, func(a, b keyValue) int { return cmp.Compare(a.rev, b.rev) })
	return kvs, nil
}

// mutexKeys names the prefix of mutex's keys, for chaosKeys.
func mutexKeys(mutex string) func(*etcd.Backend) []string {
	return func(b *etcd.Backend) []string { return []string{b.MutexPrefix(mutex)} }
}

type keyValue struct {
	key, id string
	rev     int64
}

// chaosResidue reports the keys left under the prefixes of the mutex, and of the
// semaphore and read-write lock of its name, except those of excused contenders (killed,
// or stopped with an error), which their lease's expiry removes.
func chaosResidue(ctx context.Context, addr, mutex string, excused []string) error {
	kvs, err := chaosKeys(ctx, addr, func(b *etcd.Backend) []string {
		return []string{b.MutexPrefix(mutex), b.SemaphorePrefix(mutex), b.RWMutexPrefix(mutex)}
	})
	if err != nil {
		return err
	}
	var left []string
	for _, kv := range kvs {
		if !slices.Contains(excused, kv.id) {
			left = append(left, kv.key+" ("+kv.id+")")
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("etcd: keys left of %s: %v", mutex, left)
	}
	return nil
}

// chaosOwner returns the contender ID of the mutex's oldest key.
func chaosOwner(ctx context.Context, addr, mutex string) (string, error) {
	kvs, err := chaosKeys(ctx, addr, mutexKeys(mutex))
	if err != nil || len(kvs) == 0 {
		return "", err
	}
	return kvs[0].id, nil
}
