package testserver

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// RedisCluster is a Redis Cluster on loopback: three primaries with a replica each, for
// failover and resharding tests. A killed primary's replica takes its slots over after the
// cluster's node timeout (2 s), and the primary, started again, becomes its replica.
type RedisCluster struct {
	Nodes  []*Server
	formed bool
}

// NewRedisCluster prepares six cluster nodes in dir. Call Start to run them.
func NewRedisCluster(dir string) (*RedisCluster, error) {
	c := &RedisCluster{}
	for i := range 6 {
		n, err := RedisClusterNode(filepath.Join(dir, fmt.Sprint(i+1)))
		if err != nil {
			return nil, err
		}
		n.Name = fmt.Sprintf("redis-cluster-%d", i+1)
		c.Nodes = append(c.Nodes, n)
	}
	return c, nil
}

// Start starts every node that is not running and, the first time, forms the cluster:
// three primaries, one replica each.
func (c *RedisCluster) Start(ctx context.Context) error {
	if err := startStopped(ctx, c.Nodes); err != nil {
		return err
	}
	if c.formed {
		return nil
	}
	c.formed = true
	if err := formCluster(ctx, 1, c.Nodes); err != nil {
		return err
	}
	// A replica that has not synced with its primary yet will not take its place.
	for _, n := range c.Nodes {
		cl := nodeClient(n)
		role, err := cl.Do(ctx, "role").Slice()
		_ = cl.Close()
		if err != nil {
			return err
		}
		if len(role) > 0 && role[0] == "slave" {
			if err := awaitInSync(ctx, n); err != nil {
				return err
			}
		}
	}
	return nil
}

// Stop stops every node.
func (c *RedisCluster) Stop() error { return c.each((*Server).Stop) }

// Kill kills every node (SIGKILL).
func (c *RedisCluster) Kill() error { return c.each((*Server).Kill) }

// Pause stops every node with SIGSTOP.
func (c *RedisCluster) Pause() error { return c.each((*Server).Pause) }

// Resume continues every node.
func (c *RedisCluster) Resume() error { return c.each((*Server).Resume) }

func (c *RedisCluster) each(f func(*Server) error) error { return inParallel(c.Nodes, f) }

// Addr returns every node's address, separated by commas.
func (c *RedisCluster) Addr() string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr()
	}
	return strings.Join(addrs, ",")
}

// client returns a client of node n alone.
func nodeClient(n *Server) *goredis.Client {
	return goredis.NewClient(&goredis.Options{Addr: n.Addr(), DisableIdentity: true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
}

// SlotOf returns the hash slot of key.
func (c *RedisCluster) SlotOf(ctx context.Context, key string) (int, error) {
	for _, n := range c.Nodes {
		if n.PID() == 0 {
			continue
		}
		cl := nodeClient(n)
		slot, err := cl.ClusterKeySlot(ctx, key).Result()
		_ = cl.Close()
		if err == nil {
			return int(slot), nil
		}
	}
	return 0, errors.New("testserver: no cluster node answers")
}

// Primary returns the node that serves slot as a primary, as the running nodes see it
// (they must agree).
func (c *RedisCluster) Primary(ctx context.Context, slot int) (*Server, error) {
	var found *Server
	for _, n := range c.Nodes {
		if n.PID() == 0 {
			continue
		}
		cl := nodeClient(n)
		ranges, err := cl.ClusterSlots(ctx).Result()
		_ = cl.Close()
		if err != nil {
			return nil, fmt.Errorf("testserver: cluster slots of %s: %w", n.Name, err)
		}
		var addr string
		for _, r := range ranges {
			if r.Start <= slot && slot <= r.End && len(r.Nodes) > 0 {
				addr = r.Nodes[0].Addr
			}
		}
		owner := c.node(addr)
		if owner == nil {
			return nil, fmt.Errorf("testserver: %s sees no primary for slot %d", n.Name, slot)
		}
		if found != nil && found != owner {
			return nil, fmt.Errorf("testserver: the nodes disagree on slot %d: %s and %s", slot, found.Name, owner.Name)
		}
		found = owner
	}
	if found == nil {
		return nil, errors.New("testserver: no cluster node runs")
	}
	return found, nil
}

// AwaitPrimary waits until the running nodes agree on a primary of slot other than not
// (nil: any), and returns it.
func (c *RedisCluster) AwaitPrimary(ctx context.Context, slot int, not *Server) (*Server, error) {
	for {
		p, err := c.Primary(ctx, slot)
		if err == nil && p != not && p.PID() != 0 {
			return p, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("testserver: no new primary of slot %d: %v", slot, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *RedisCluster) node(addr string) *Server {
	for _, n := range c.Nodes {
		if n.Addr() == addr {
			return n
		}
	}
	return nil
}

// MoveSlot moves slot from its primary to the primary to, as redis-cli's reshard does:
// the destination imports it, the source migrates it, its keys move with MIGRATE, and
// every primary learns the new owner. Meanwhile clients are redirected (ASK) or told to
// try again (a script whose keys are split between the two).
func (c *RedisCluster) MoveSlot(ctx context.Context, slot int, to *Server) error {
	from, err := c.Primary(ctx, slot)
	if err != nil {
		return err
	}
	if from == to {
		return nil
	}
	src, dst := nodeClient(from), nodeClient(to)
	defer src.Close()
	defer dst.Close()
	srcID, err1 := src.Do(ctx, "cluster", "myid").Text()
	dstID, err2 := dst.Do(ctx, "cluster", "myid").Text()
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	if err := dst.Do(ctx, "cluster", "setslot", slot, "importing", srcID).Err(); err != nil {
		return fmt.Errorf("testserver: importing slot %d: %w", slot, err)
	}
	if err := src.Do(ctx, "cluster", "setslot", slot, "migrating", dstID).Err(); err != nil {
		return fmt.Errorf("testserver: migrating slot %d: %w", slot, err)
	}
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, slot, 100).Result()
		if err != nil {
			return err
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"migrate", to.Host, strconv.Itoa(to.Port), "", 0, 5000, "keys"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := src.Do(ctx, args...).Err(); err != nil {
			return fmt.Errorf("testserver: migrating the keys of slot %d: %w", slot, err)
		}
	}
	// The destination first, then the source, then the others, as redis-cli does.
	order := []*Server{to, from}
	for _, n := range c.Nodes {
		if n != to && n != from && n.PID() != 0 {
			order = append(order, n)
		}
	}
	for _, n := range order {
		cl := nodeClient(n)
		role, err := cl.Do(ctx, "role").Slice()
		if err == nil && len(role) > 0 && role[0] == "master" {
			err = cl.Do(ctx, "cluster", "setslot", slot, "node", dstID).Err()
		}
		_ = cl.Close()
		if err != nil {
			return fmt.Errorf("testserver: giving slot %d to %s on %s: %w", slot, to.Name, n.Name, err)
		}
	}
	return nil
}

// Primaries returns the running nodes that are primaries now.
func (c *RedisCluster) Primaries(ctx context.Context) ([]*Server, error) {
	var out []*Server
	for _, n := range c.Nodes {
		if n.PID() == 0 {
			continue
		}
		cl := nodeClient(n)
		role, err := cl.Do(ctx, "role").Slice()
		_ = cl.Close()
		if err != nil {
			return nil, err
		}
		if len(role) > 0 && role[0] == "master" {
			out = append(out, n)
		}
	}
	return out, nil
}
