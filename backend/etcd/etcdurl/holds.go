package etcdurl

import (
	"context"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/etcd"
	"github.com/simba-go/simba/storeurl"
)

// heldKey is a hold's marker key, with the key of its place.
type heldKey struct {
	marker, place string
	holder        storeurl.Holder
}

// holds lists and releases the holds of b's semaphores and read-write locks, in the keys
// the etcd backend's package doc describes: a hold is its marker, whose create revision
// is its token and whose value is its holder's ID.
type holds struct {
	client *clientv3.Client
	b      *etcd.Backend
}

// list returns the holders of kind k, of name alone unless it is "".
func (h holds) list(ctx context.Context, k backend.Kind, name string) ([]storeurl.Holder, error) {
	keys, err := h.held(ctx, k, name)
	if err != nil {
		return nil, err
	}
	out := make([]storeurl.Holder, 0, len(keys))
	for _, key := range keys {
		out = append(out, key.holder)
	}
	return out, nil
}

// release deletes the marker and the place of hold x in one transaction, if the marker
// is still x's tenure: its create revision is x's token.
func (h holds) release(ctx context.Context, x storeurl.Holder) (bool, error) {
	keys, err := h.held(ctx, x.Kind, x.Name)
	if err != nil {
		return false, err
	}
	for _, key := range keys {
		if key.holder.ID != x.ID || key.holder.Token != x.Token {
			continue
		}
		resp, err := h.client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key.marker), "=", int64(x.Token))).
			Then(clientv3.OpDelete(key.marker), clientv3.OpDelete(key.place)).Commit()
		if err != nil {
			return false, err
		}
		return resp.Succeeded, nil
	}
	return false, nil
}

// held reads the marker keys of kind k (of name alone unless it is ""): <name>/<permits>/h/<key>
// for a semaphore, <name>/hr/<key> or <name>/hw/<key> for a read-write lock.
func (h holds) held(ctx context.Context, k backend.Kind, name string) ([]heldKey, error) {
	root := strings.TrimSuffix(h.b.RWMutexPrefix("-"), "-/")
	if k == backend.Semaphore {
		root = strings.TrimSuffix(h.b.SemaphorePrefix("-"), "-/")
	}
	from := root
	if name != "" {
		from += name + "/"
	}
	resp, err := h.client.Get(ctx, from, clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	var out []heldKey
	for _, kv := range resp.Kvs {
		parts := strings.Split(strings.TrimPrefix(string(kv.Key), root), "/")
		n := len(parts)
		if n < 3 {
			continue
		}
		key, mark := parts[n-1], parts[n-2]
		var holdName, place string
		shared := false
		switch {
		case k == backend.Semaphore && mark == "h" && n >= 4 && isCount(parts[n-3]):
			holdName = strings.Join(parts[:n-3], "/")
			place = root + strings.Join(append(parts[:n-2:n-2], "q", key), "/")
		case k == backend.RWLock && (mark == "hr" || mark == "hw"):
			holdName, shared = strings.Join(parts[:n-2], "/"), mark == "hr"
			place = root + holdName + "/" + mark[1:] + "/" + key
		default:
			continue // a place, or another kind's
		}
		if holdName == "" || (name != "" && holdName != name) {
			continue
		}
		out = append(out, heldKey{marker: string(kv.Key), place: place, holder: storeurl.Holder{
			Kind: k, Name: holdName, ID: string(kv.Value), Shared: shared, Token: uint64(kv.CreateRevision),
		}})
	}
	return out, nil
}

// isCount reports whether s is a permit count.
func isCount(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n > 0
}
