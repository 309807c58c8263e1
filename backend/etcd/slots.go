package etcd

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// Slot records: see "Slot records" in the package documentation.

// SlotKey returns the key of mutex's slot record: <prefix>/slot/<mutex>. No mutex's prefix
// holds it (a mutex's name is never empty), so no contender lists it.
func (b *Backend) SlotKey(mutex string) string { return b.prefix + "/slot/" + mutex }

var _ backend.SlotRecorder = (*contention)(nil)

// LastSlot reads the mutex's slot record (a linearizable read); the zero Slot when there
// is none.
func (c *contention) LastSlot(ctx context.Context) (backend.Slot, error) {
	key, err := c.slotKey()
	if err != nil {
		return backend.Slot{}, err
	}
	r, err := c.readSlot(ctx, key)
	if err != nil {
		return backend.Slot{}, err
	}
	return r.slot(), nil
}

// ClaimSlot records s if it is later than the recorded slot, with a token not below its
// token. The contention remembers the record it saw last: when s passes it, one
// transaction puts s if the record is still that one (its mod revision; none: absent),
// and reads the record otherwise; the record read decides, and a claim tries again
// expecting it. So a claim is one request unless another contention claimed since, and a
// retry after a lost reply finds s recorded and answers false.
func (c *contention) ClaimSlot(ctx context.Context, s backend.Slot) (bool, error) {
	key, err := c.slotKey()
	if err != nil {
		return false, err
	}
	want, err := newSlotRecord(s)
	if err != nil {
		return false, err
	}
	c.b.mu.Lock()
	cur, fresh := c.slotSeen, false // fresh: read by this call
	c.b.mu.Unlock()
	for {
		if !want.passes(cur) {
			if fresh {
				return false, nil
			}
			// Seen by an earlier call: records only pass each other, so s cannot pass
			// the record now either, unless someone deleted it. Read it to know.
			if cur, err = c.readSlot(ctx, key); err != nil {
				return false, err
			}
			fresh = true
			continue
		}
		floor := c.b.revisionFloor()
		resp, err := c.b.client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", cur.mod)).
			Then(clientv3.OpPut(key, want.String())).
			Else(clientv3.OpGet(key)).
			Commit()
		if err != nil {
			return false, storeError("claim slot", key, err)
		}
		c.b.sawRevision(resp.Header, floor)
		if resp.Succeeded {
			want.mod = resp.Header.Revision
			c.sawSlot(want)
			return true, nil
		}
		if cur, err = c.parseSlot(key, resp.Responses[0].GetResponseRange().Kvs); err != nil {
			return false, err
		}
		fresh = true
	}
}

// slotKey returns the key of the contention's slot record: only a mutex has one.
func (c *contention) slotKey() (string, error) {
	if c.p.Hold.Kind != backend.Mutex {
		return "", simba.InvalidArgument("kind", c.p.Hold.Kind, "records no slots: only a mutex does")
	}
	return c.b.SlotKey(c.p.Mutex), nil
}

// readSlot reads the slot record at key, linearizably.
func (c *contention) readSlot(ctx context.Context, key string) (slotRecord, error) {
	floor := c.b.revisionFloor()
	resp, err := c.b.client.Get(ctx, key)
	if err != nil {
		return slotRecord{}, storeError("read", key, err)
	}
	c.b.sawRevision(resp.Header, floor)
	return c.parseSlot(key, resp.Kvs)
}

// parseSlot parses the slot record read at key (kvs empty: none), and remembers it for
// the contention's next claim.
func (c *contention) parseSlot(key string, kvs []*mvccpb.KeyValue) (slotRecord, error) {
	var r slotRecord
	if len(kvs) > 0 {
		var err error
		if r, err = parseSlotRecord(string(kvs[0].Value)); err != nil {
			return slotRecord{}, fmt.Errorf("simba/etcd: slot record %s: %w", key, err)
		}
		r.mod = kvs[0].ModRevision
	}
	c.sawSlot(r)
	return r, nil
}

// sawSlot remembers r, the slot record as it is now, for the contention's next claim.
func (c *contention) sawSlot(r slotRecord) {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	c.slotSeen = r
}

// slotRecord is a slot as its record keeps it: "<At in Unix nanoseconds> <token>", in
// decimal.
type slotRecord struct {
	at    int64
	token uint64
	mod   int64 // the record's mod revision when read; 0: none
}

// newSlotRecord returns the record of s, whose instant must lie within Unix nanoseconds'
// range.
func newSlotRecord(s backend.Slot) (slotRecord, error) {
	at, ok := s.Nanos()
	if !ok {
		return slotRecord{}, simba.InvalidArgument("slot instant", s.At, backend.SlotRange)
	}
	return slotRecord{at: at, token: s.Token}, nil
}

// passes reports whether r may be recorded over cur: r is later, with a token not below
// cur's. Any slot passes none.
func (r slotRecord) passes(cur slotRecord) bool {
	return cur.mod == 0 || r.at > cur.at && r.token >= cur.token
}

func (r slotRecord) String() string {
	return strconv.FormatInt(r.at, 10) + " " + strconv.FormatUint(r.token, 10)
}

// slot returns the slot r records; the zero Slot for none.
func (r slotRecord) slot() backend.Slot {
	if r.mod == 0 {
		return backend.Slot{}
	}
	return backend.Slot{At: backend.SlotAt(r.at), Token: r.token}
}

// parseSlotRecord parses a record's value. A malformed one is refused: no retry cures it.
func parseSlotRecord(v string) (slotRecord, error) {
	at, token, ok := strings.Cut(v, " ")
	var r slotRecord
	var err error
	if ok {
		if r.at, err = strconv.ParseInt(at, 10, 64); err == nil {
			r.token, err = strconv.ParseUint(token, 10, 64)
		}
	}
	if !ok || err != nil {
		return slotRecord{}, fmt.Errorf("%w: malformed: %q, want \"<Unix nanoseconds> <token>\"", simba.ErrRefused, v)
	}
	return r, nil
}
