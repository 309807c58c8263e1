package etcd

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// Semaphores and read-write locks: see "Semaphores and read-write locks" in the package
// documentation for the keys and the rules of admission.

var _ backend.Holder = (*Backend)(nil)

// Holds reports that the backend keeps mutexes, semaphores and read-write locks; see
// backend.Holder.
func (b *Backend) Holds(k backend.Kind) bool {
	return k == backend.Mutex || k == backend.Semaphore || k == backend.RWLock
}

// SemaphorePrefix returns the prefix of semaphore name's keys: <prefix>/semaphore/<name>/.
// No mutex has it: a mutex's name is never empty.
func (b *Backend) SemaphorePrefix(name string) string { return b.prefix + "/semaphore/" + name + "/" }

// RWMutexPrefix returns the prefix of read-write lock name's keys: <prefix>/rwlock/<name>/.
func (b *Backend) RWMutexPrefix(name string) string { return b.prefix + "/rwlock/" + name + "/" }

// holdDirs returns where participant p's keys lie: dir, under which lies every key that
// decides its turn, and for a semaphore or read-write lock queue and held, the prefixes
// of its key and of its marker.
func (b *Backend) holdDirs(p backend.Participant) (dir, queue, held string) {
	switch p.Hold.Kind {
	case backend.Semaphore:
		dir = b.SemaphorePrefix(p.Mutex) + strconv.Itoa(p.Hold.Permits) + "/"
		return dir, dir + "q/", dir + "h/"
	case backend.RWLock:
		dir = b.RWMutexPrefix(p.Mutex)
		if p.Hold.Shared {
			return dir, dir + "r/", dir + "hr/"
		}
		return dir, dir + "w/", dir + "hw/"
	}
	return b.MutexPrefix(p.Mutex), "", ""
}

// noKey is the comparison that holds while no key lies in [from, end).
func noKey(from, end string) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(from), "=", 0).WithRange(end)
}

// joinHold puts the contender's key if it does not exist (a retry after a lost reply finds
// it) and, for a semaphore, if no key of another permit count lies under the name: a
// mismatch is refused. The same transaction reads what decides its admission (decideHold).
func (c *contention) joinHold(ctx context.Context) (look, error) {
	floor := c.b.revisionFloor()
	ifs := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(c.key), "=", 0)}
	orElse := []clientv3.Op{clientv3.OpGet(c.key)}
	name := c.b.SemaphorePrefix(c.p.Mutex)
	if c.p.Hold.Kind == backend.Semaphore {
		// The keys of other counts lie under the name, before c.dir or after it.
		after, end := clientv3.GetPrefixRangeEnd(c.dir), clientv3.GetPrefixRangeEnd(name)
		ifs = append(ifs, noKey(name, c.dir), noKey(after, end))
		orElse = append(orElse,
			clientv3.OpGet(name, clientv3.WithRange(c.dir), clientv3.WithKeysOnly(), clientv3.WithLimit(1)),
			clientv3.OpGet(after, clientv3.WithRange(end), clientv3.WithKeysOnly(), clientv3.WithLimit(1)))
	}
	// Read after the put, every other key was created before the contender's.
	then := append([]clientv3.Op{clientv3.OpPut(c.key, c.p.ContenderID, clientv3.WithLease(c.keyLease))},
		c.holdOps(func(*clientv3.Op) {}, 1)...)
	resp, err := c.b.client.Txn(ctx).If(ifs...).Then(then...).Else(orElse...).Commit()
	if err != nil {
		return look{}, storeError("put", c.key, err)
	}
	c.b.sawRevision(resp.Header, floor)
	if resp.Succeeded {
		c.rev = resp.Header.Revision
		return c.decideHold(ctx, resp, 1)
	}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		c.rev = kvs[0].CreateRevision
		c.log.Info("simba/etcd: found the key of a put whose reply was lost", "key", c.key)
		return c.readHold(ctx)
	}
	for _, r := range resp.Responses[1:] {
		if kvs := r.GetResponseRange().Kvs; len(kvs) > 0 {
			count, _, _ := strings.Cut(strings.TrimPrefix(string(kvs[0].Key), name), "/")
			return look{}, fmt.Errorf("simba/etcd: semaphore %q has %s permits, not %d: %w",
				c.p.Mutex, count, c.p.Hold.Permits, simba.ErrRefused)
		}
	}
	return look{again: true}, nil
}

// holdOps returns the reads that decide the contender's admission: the holders to report
// while it waits, and the keys before its own, which before selects, each read with extra
// room in its limit for the contender's own key.
func (c *contention) holdOps(before clientv3.OpOption, extra int64) []clientv3.Op {
	last := append(clientv3.WithLastCreate(), before, clientv3.WithKeysOnly(), clientv3.WithLimit(1+extra))
	if c.p.Hold.Kind == backend.Semaphore {
		return []clientv3.Op{
			clientv3.OpGet(c.held, clientv3.WithFirstCreate()...),
			// Up to Permits+1 keys before it: fewer than Permits admit it.
			clientv3.OpGet(c.queue, clientv3.WithPrefix(), clientv3.WithKeysOnly(), before, clientv3.WithLimit(int64(c.p.Hold.Permits)+1+extra)),
			clientv3.OpGet(c.queue, last...),
		}
	}
	ahead := c.dir // a writer: any key before it
	if c.p.Hold.Shared {
		ahead = c.dir + "w/" // a reader: a writer before it
	}
	return []clientv3.Op{
		clientv3.OpGet(c.dir+"hw/", clientv3.WithFirstCreate()...),
		clientv3.OpGet(c.dir+"hr/", clientv3.WithFirstCreate()...),
		clientv3.OpGet(ahead, last...),
	}
}

// readHold reads, in one transaction, the contender's key and marker and what decides its
// admission (decideHold).
func (c *contention) readHold(ctx context.Context) (look, error) {
	floor := c.b.revisionFloor()
	ops := append([]clientv3.Op{clientv3.OpGet(c.key), clientv3.OpGet(c.marker)},
		c.holdOps(clientv3.WithMaxCreateRev(c.rev-1), 0)...)
	resp, err := c.b.client.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return look{}, storeError("read", c.dir, err)
	}
	c.b.sawRevision(resp.Header, floor)
	if own := resp.Responses[0].GetResponseRange().Kvs; len(own) == 0 || own[0].CreateRevision != c.rev {
		c.log.Info("simba/etcd: this contender's key is gone", "key", c.key)
		c.suspendView()
		c.rev = 0 // join again, unless it served its tenure (see step)
		return look{again: true}, nil
	}
	if m := resp.Responses[1].GetResponseRange().Kvs; len(m) > 0 {
		return c.holding(resp.Header.Revision, m[0].CreateRevision), nil // admitted, its reply lost
	}
	return c.decideHold(ctx, resp, 2)
}

// decideHold admits the contender when its turn has come, and otherwise watches what can
// bring it, from the answers of holdOps in resp from index i on.
func (c *contention) decideHold(ctx context.Context, resp *clientv3.TxnResponse, i int) (look, error) {
	kvs := func(j int) []*mvccpb.KeyValue {
		return slices.DeleteFunc(resp.Responses[i+j].GetResponseRange().Kvs, func(kv *mvccpb.KeyValue) bool {
			return string(kv.Key) == c.key // read after its put: not before itself
		})
	}
	lk := look{rev: resp.Header.Revision, watch: []target{{key: c.key}}} // its deletion ends the contention's place
	if c.p.Hold.Kind == backend.Semaphore {
		lk.v = holderView(kvs(0))
		queued, pred := kvs(1), kvs(2)
		switch {
		case len(queued) < c.p.Hold.Permits:
			return c.admit(ctx)
		case len(queued) == c.p.Hold.Permits:
			// The first waiter: the release of any key before it admits it.
			lk.watch = append(lk.watch, target{key: c.queue, prefix: true, before: c.rev})
		default:
			// Behind another waiter: that one is admitted (its marker is put) or leaves first.
			p := string(pred[0].Key)
			lk.watch = append(lk.watch, target{key: p}, target{key: c.held + strings.TrimPrefix(p, c.queue), puts: true})
		}
		return lk, nil
	}
	writer, reader, pred := kvs(0), kvs(1), kvs(2)
	lk.v = holderView(writer)
	if len(writer) == 0 {
		lk.v = holderView(reader)
	}
	switch {
	case c.p.Hold.Shared && c.p.Hold.Beside != "" && len(writer) > 0 && string(writer[0].Value) == c.p.Hold.Beside:
		// A downgrade, admitted beside its write hold while that stands: a writer waiting
		// ahead sees the read hold's marker once the write hold is gone.
		return c.admit(ctx, clientv3.Compare(clientv3.CreateRevision(string(writer[0].Key)), "=", writer[0].CreateRevision))
	case len(pred) > 0:
		lk.watch = append(lk.watch, target{key: string(pred[0].Key)})
	case !c.p.Hold.Shared && len(reader) > 0:
		// The first writer, behind a downgrade's read hold: that read key came after this
		// writer's, and holds by its marker (Curator's CURATOR-621).
		lk.watch = append(lk.watch, target{key: string(reader[0].Key)})
	default:
		// No marker of the other side can be put meanwhile; the guard says so where it
		// is decided.
		other := c.dir + "hr/"
		if c.p.Hold.Shared {
			other = c.dir + "hw/"
		}
		return c.admit(ctx, noKey(other, clientv3.GetPrefixRangeEnd(other)))
	}
	return lk, nil
}

// holderView is a waiter's view of the holder whose marker is first of kvs, or of none.
// The holder that came first is reported: when another process's lease ends is not known
// here.
func holderView(kvs []*mvccpb.KeyValue) view {
	if len(kvs) == 0 {
		return view{}
	}
	return view{ownerKey: string(kvs[0].Key), owner: string(kvs[0].Value), token: uint64(kvs[0].CreateRevision)}
}

// admit puts the contender's marker, if its key still stands and guard holds. The
// marker's create revision is the hold's token: new at the admission, above every token
// of the name handed out before.
func (c *contention) admit(ctx context.Context, guard ...clientv3.Cmp) (look, error) {
	floor := c.b.revisionFloor()
	ifs := append([]clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(c.key), "=", c.rev),
		clientv3.Compare(clientv3.CreateRevision(c.marker), "=", 0),
	}, guard...)
	resp, err := c.b.client.Txn(ctx).If(ifs...).
		Then(clientv3.OpPut(c.marker, c.p.ContenderID, clientv3.WithLease(c.keyLease))).Commit()
	if err != nil {
		return look{}, storeError("put", c.marker, err)
	}
	c.b.sawRevision(resp.Header, floor)
	if !resp.Succeeded {
		return look{again: true}, nil // its key, the marker or the guard changed: read again
	}
	return c.holding(resp.Header.Revision, resp.Header.Revision), nil
}

// holding is the look of an admitted contender, read at rev, whose marker was put at token.
func (c *contention) holding(rev, token int64) look {
	return look{rev: rev, watch: []target{{key: c.key}},
		v: view{self: true, ownerKey: c.key, owner: c.p.ContenderID, token: uint64(token)}}
}
