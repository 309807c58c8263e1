package etcd

import (
	"context"
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// FenceKey returns the comparison that holds in an etcd transaction while key still has
// create revision token: the tenure whose owner key is key, and whose fencing token is
// token, has not ended.
//
//	clientv3.Compare(clientv3.CreateRevision(key), "=", int64(token))
//
// A contender's key is put once and deleted when its tenure ends (released, its lease
// expired or revoked, deleted by ReleaseOwner); a key put again under the same name has a
// later create revision. No key older than an owner's can appear under its mutex, so the
// owner stays the owner for as long as its key exists: the comparison fails from the
// moment the tenure ends on the store, whatever the old owner believes.
func FenceKey(key string, token uint64) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(key), "=", int64(token))
}

// Fence returns the guard of a write that the tenure of mutex whose fencing token is
// token makes to a resource kept in the same etcd: FenceKey of the owner's key.
//
//	guard, err := b.Fence(ctx, "orders", lease.Token())
//	resp, err := client.Txn(ctx).If(guard).Then(clientv3.OpPut("orders/state", v)).Commit()
//	// !resp.Succeeded: the tenure is over, and the write was not made.
//
// The key is found without a request when a contention of this backend owns the mutex
// with that token, and otherwise by one read of the keys created at revision token. When
// there is none, the tenure is over: the error wraps simba.ErrOwnershipLost.
func (b *Backend) Fence(ctx context.Context, mutex string, token uint64) (clientv3.Cmp, error) {
	if err := b.validTenure(mutex, token); err != nil {
		return clientv3.Cmp{}, err
	}
	if key := b.ownKey(mutex, token); key != "" {
		return FenceKey(key, token), nil
	}
	dir := b.MutexPrefix(mutex)
	resp, err := b.client.Get(ctx, dir, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(1),
		clientv3.WithMinCreateRev(int64(token)), clientv3.WithMaxCreateRev(int64(token)))
	if err != nil {
		return clientv3.Cmp{}, storeError("read", dir, err)
	}
	if len(resp.Kvs) == 0 {
		return clientv3.Cmp{}, fmt.Errorf("simba/etcd: fence %q: no key of the mutex has token %d: %w", mutex, token, simba.ErrOwnershipLost)
	}
	return FenceKey(string(resp.Kvs[0].Key), token), nil
}

// ownKey returns the key of this backend's contention that owns mutex with token, or "".
func (b *Backend) ownKey(mutex string, token uint64) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	for c := range b.contentions {
		if v := c.view; c.p.Mutex == mutex && c.p.Hold.Kind == backend.Mutex && v.valid && v.self && v.token == token {
			return v.ownerKey
		}
	}
	return ""
}

// validTenure checks the names of a tenure that Fence or ReleaseOwner is given.
func (b *Backend) validTenure(mutex string, token uint64) error {
	if err := simba.ValidateMutex(mutex); err != nil {
		return err
	}
	if err := b.ValidateMutex(mutex); err != nil {
		return err
	}
	if token == 0 || token > 1<<63-1 {
		return simba.InvalidArgument("token", token, "must be a tenure's fencing token, as a lease or a lookup tells it")
	}
	return nil
}

// ReleaseOwner ends the tenure owner of mutex, as a lookup reported it, by deleting its
// key, if that key still owns the mutex: the lowest key, with owner.ID as its value and
// owner.Token as its create revision. Otherwise the tenure has ended already, and it does
// nothing. The owner's contention sees its key go and stops believing. Requests are
// bounded by ctx.
func (b *Backend) ReleaseOwner(ctx context.Context, mutex string, owner simba.Owner) error {
	if owner.ID == "" {
		return simba.InvalidArgument("owner", owner.ID, "must name a tenure: a contender ID and its token, as a lookup reports them")
	}
	if err := b.validTenure(mutex, owner.Token); err != nil {
		return err
	}
	dir := b.MutexPrefix(mutex)
	resp, err := b.client.Get(ctx, dir, clientv3.WithFirstCreate()...)
	if err != nil {
		return storeError("read", dir, err)
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	kv := resp.Kvs[0]
	if id, _ := parseKeyValue(kv.Value); id != owner.ID || uint64(kv.CreateRevision) != owner.Token {
		return nil // another tenure
	}
	key := string(kv.Key)
	if _, err := b.client.Txn(ctx).If(FenceKey(key, owner.Token)).Then(clientv3.OpDelete(key)).Commit(); err != nil {
		return storeError("delete", key, err)
	}
	return nil
}

// Mutexes returns the names of the mutexes that have contenders now, sorted: one name per
// distinct segment after the prefix among the backend's keys. Requests are bounded by ctx.
func (b *Backend) Mutexes(ctx context.Context) ([]string, error) {
	resp, err := b.client.Get(ctx, b.prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, storeError("list", b.prefix, err)
	}
	var names []string
	for _, kv := range resp.Kvs {
		rest := strings.TrimPrefix(string(kv.Key), b.prefix)
		if name, _, ok := strings.Cut(rest, "/"); ok && name != "" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}
