package etcd

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// Hand-offs: see "Hand-off" in the package documentation.

var _ backend.HandOffer = (*contention)(nil)

// Waiters lists the contenders whose keys lie after the owner's, in create order, with
// the values of their keys.
func (c *contention) Waiters(ctx context.Context) ([]backend.Waiter, error) {
	kvs, err := c.keys(ctx)
	if err != nil || len(kvs) < 2 {
		return nil, err
	}
	ws := make([]backend.Waiter, 0, len(kvs)-1)
	for _, kv := range kvs[1:] {
		id, value := parseKeyValue(kv.Value)
		ws = append(ws, backend.Waiter{ID: id, Value: value})
	}
	return ws, nil
}

// HandOff gives the mutex to the first waiter whose ID is to: in one transaction that
// compares the create revisions of this contender's key (it still exists, so it is still
// the lowest) and of to's key, it deletes this contender's key and the keys of the
// waiters ahead of to's, each if it is still the key read (a key put again under its name
// since lies behind to's). to's key is then the lowest: to owns, with its key's create
// revision as its token and its key's value, and learns it from its watch on the key
// before its own. Then it puts again, one after the other and each if it is absent, the
// keys of the waiters passed over, in their order, and its own, each with its lease and
// value: they wait behind those that waited behind to, the caller last, and their
// contentions take the new keys as theirs.
func (c *contention) HandOff(ctx context.Context, to string) error {
	c.b.mu.Lock()
	v := c.view
	c.b.mu.Unlock()
	if !v.self || v.ownerKey == "" {
		return fmt.Errorf("simba/etcd: hand-off of %q to %q: this contender does not own it: %w", c.p.Mutex, to, simba.ErrNotOwner)
	}
	kvs, err := c.keys(ctx)
	if err != nil {
		return err
	}
	if len(kvs) == 0 || string(kvs[0].Key) != v.ownerKey || uint64(kvs[0].CreateRevision) != v.token {
		return fmt.Errorf("simba/etcd: hand-off of %q to %q: this contender's key does not own it: %w", c.p.Mutex, to, simba.ErrNotOwner)
	}
	ahead := kvs[1:]
	for len(ahead) > 0 {
		if id, _ := parseKeyValue(ahead[0].Value); id == to {
			break
		}
		ahead = ahead[1:]
	}
	if len(ahead) == 0 {
		return fmt.Errorf("simba/etcd: hand-off of %q to %q: no key of %q waits: %w", c.p.Mutex, to, to, simba.ErrNotWaiting)
	}
	target, passed := ahead[0], kvs[1:len(kvs)-len(ahead)]
	ops := make([]clientv3.Op, 0, len(passed)+1)
	for _, kv := range passed {
		key := string(kv.Key)
		ops = append(ops, clientv3.OpTxn([]clientv3.Cmp{FenceKey(key, uint64(kv.CreateRevision))}, []clientv3.Op{clientv3.OpDelete(key)}, nil))
	}
	ops = append(ops, clientv3.OpDelete(v.ownerKey))
	c.holdJoins(true) // this contention's own join would come before the keys passed over
	defer c.holdJoins(false)
	floor := c.b.revisionFloor()
	resp, err := c.b.client.Txn(ctx).
		If(FenceKey(v.ownerKey, v.token), FenceKey(string(target.Key), uint64(target.CreateRevision))).
		Then(ops...).
		Else(clientv3.OpGet(v.ownerKey, clientv3.WithKeysOnly())).
		Commit()
	if err != nil {
		return storeError("hand off", v.ownerKey, err)
	}
	c.b.sawRevision(resp.Header, floor)
	if !resp.Succeeded {
		if own := resp.Responses[0].GetResponseRange().Kvs; len(own) == 0 || uint64(own[0].CreateRevision) != v.token {
			return fmt.Errorf("simba/etcd: hand-off of %q to %q: this contender's key is gone: %w", c.p.Mutex, to, simba.ErrNotOwner)
		}
		return fmt.Errorf("simba/etcd: hand-off of %q to %q: its key is gone: %w", c.p.Mutex, to, simba.ErrNotWaiting)
	}
	c.b.mu.Lock()
	if c.view.self && c.view.ownerKey == v.ownerKey && c.view.token == v.token {
		c.suspend() // no report names this contender now, before its watch tells it
	}
	c.b.mu.Unlock()
	for _, kv := range append(passed, kvs[0]) {
		if c.halted() {
			break // stopped: its key must not come back, and the others join by themselves
		}
		c.queueAgain(ctx, kv)
	}
	return nil
}

// queueAgain puts kv, a key a hand-off deleted, again if it is absent, with its lease and
// value. A key that cannot be put (its lease is gone, the request failed) is left to its
// contention, which joins again by itself, at the back.
func (c *contention) queueAgain(ctx context.Context, kv *mvccpb.KeyValue) {
	key := string(kv.Key)
	floor := c.b.revisionFloor()
	resp, err := c.b.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(kv.Value), clientv3.WithLease(clientv3.LeaseID(kv.Lease)))).
		Commit()
	if err != nil {
		c.log.Info("simba/etcd: a key the hand-off passed over was not queued again; its contention joins by itself", "key", key, "err", err)
		return
	}
	c.b.sawRevision(resp.Header, floor)
}

// holdJoins keeps run from joining while HandOff queues the keys it deleted (on), and lets
// it look again (off).
func (c *contention) holdJoins(on bool) {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	c.handingOff = on
	if !on {
		c.poke()
	}
}

// keys reads the mutex's keys in create order (a linearizable read): the owner's first.
func (c *contention) keys(ctx context.Context) ([]*mvccpb.KeyValue, error) {
	if c.p.Hold.Kind != backend.Mutex {
		return nil, simba.InvalidArgument("kind", c.p.Hold.Kind, "is not handed off: only a mutex is")
	}
	floor := c.b.revisionFloor()
	resp, err := c.b.client.Get(ctx, c.dir, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, storeError("list", c.dir, err)
	}
	c.b.sawRevision(resp.Header, floor)
	return resp.Kvs, nil
}
