package redis

import (
	"context"
	_ "embed" // the Lua script of ReleaseHolder
	"strconv"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

var (
	//go:embed holds_release_holder.lua
	holdsReleaseHolderLua    string
	holdsReleaseHolderScript = newHoldsScript("holds_release_holder", holdsReleaseHolderLua)
)

// ReleaseHolder gives up holder id's hold of the semaphore or read-write lock name (kind
// k), in its name, only while that hold's token is token, and wakes the waiters that now
// fit: an administrator's release of one stuck holder (storeurl). A later hold of the
// same ID has a new token and is left alone; released tells whether a hold was freed. The
// holder is not told: it goes on believing until its next renewal finds its hold gone.
func (b *Backend) ReleaseHolder(ctx context.Context, k backend.Kind, name, id string, token uint64) (released bool, err error) {
	if k != backend.Semaphore && k != backend.RWLock {
		return false, simba.InvalidArgument("kind", k.String(), "must be a semaphore or a read-write lock")
	}
	if err := b.validateRelease(name, simba.Owner{ID: id}); err != nil {
		return false, err
	}
	if id == "" || token == 0 {
		return false, simba.InvalidArgument("holder", id, "must name a hold: a holder ID and its token, as a listing reports them")
	}
	if err := b.usable(ctx); err != nil {
		return false, err
	}
	mode := "x" // a read hold's release wakes the same waiters as a write hold's
	if k == backend.Semaphore {
		mode = "p"
	}
	n, err := b.scripts.run(ctx, holdsReleaseHolderScript, holdKeys(k, name), id, mode, strconv.FormatUint(token, 10)).Int()
	if err != nil {
		return false, b.storeError(ctx, "release in the name of "+strconv.Quote(id), err)
	}
	return n == 1, nil
}
