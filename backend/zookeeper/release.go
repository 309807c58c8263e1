package zookeeper

import (
	"context"
	"errors"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba"
)

// ReleaseOwner ends the tenure owner of mutex, as a lookup reported it, by deleting its
// node, if that node still owns the mutex: the lowest node, with owner.ID as its data and
// owner.Token as its czxid. Otherwise the tenure has ended already, and it does nothing.
// The owner's contention sees its node go and stops believing. Requests are bounded by ctx.
func (b *Backend) ReleaseOwner(ctx context.Context, mutex string, owner simba.Owner) error {
	if err := simba.ValidateMutex(mutex); err != nil {
		return err
	}
	if err := b.ValidateMutex(mutex); err != nil {
		return err
	}
	if owner.ID == "" || owner.Token == 0 {
		return simba.InvalidArgument("owner", owner.ID, "must name a tenure: a contender ID and its token, as a lookup reports them")
	}
	parent := mutexPath(mutex)
	kids, err := b.children(ctx, parent)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return nil
	case err != nil:
		return b.explain(storeError("list", parent, err))
	}
	nodes := latches(kids)
	if len(nodes) == 0 {
		return nil
	}
	head := parent + "/" + nodes[0].name
	n, err := b.get(ctx, head)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return nil // its tenure ended meanwhile
	case err != nil:
		return b.explain(storeError("read", head, err))
	case string(n.data) != owner.ID || uint64(n.st.Czxid) != owner.Token:
		return nil // another tenure
	}
	if err := b.delete(ctx, head); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return b.explain(storeError("delete", head, err))
	}
	return nil
}
