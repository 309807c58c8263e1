package zookeeper

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/backend"
)

var _ backend.ValueKeeper = (*Backend)(nil)

// KeepsValues reports whether the backend keeps owner values for names of kind k: for
// mutexes, in value nodes beside the contenders' nodes (see the package documentation,
// Owner values), when go-zookeeper is v1.0.4, whose request method the multi that makes
// both nodes at once goes through (see raw.go).
func (*Backend) KeepsValues(k backend.Kind) bool { return k == backend.Mutex && rawRequests }

// valueNodeOf returns the path of the value node of the contender node at path (under
// c.parent); ok is false when its name marks no value.
func (c *contention) valueNodeOf(path string) (string, bool) {
	name, ok := valueName(base(path))
	if !ok {
		return "", false
	}
	return valuesPath(c.p.Mutex) + "/" + name, true
}

// readOwnerNode reads the owner's node at path through read and, when its name marks a
// value, the value node in the same round trip: value is the owner value of the tenure
// the node is, or empty when it has none. A value node made by another transaction than
// the owner's node (its czxid another) is no value of that tenure.
func (c *contention) readOwnerNode(ctx context.Context, path string, read func(context.Context, string) (node, error)) (n node, value string, err error) {
	vpath, ok := c.valueNodeOf(path)
	if !ok {
		n, err = read(ctx, path)
		return n, "", err
	}
	var v node
	var verr error
	together(func() { n, err = read(ctx, path) }, func() { v, verr = c.b.get(ctx, vpath) })
	switch {
	case err != nil:
		return n, "", err
	case errors.Is(verr, zk.ErrNoNode):
		return n, "", nil // deleted by hand: the owner's value is unknown
	case verr != nil:
		return n, "", fmt.Errorf("value node %s: %w", vpath, verr)
	case v.st.Czxid != n.st.Czxid:
		return n, "", nil
	}
	return n, string(v.data), nil
}

// watchedRead is a read of a node with a data watch armed for this session (get), as
// readOwnerNode takes it.
func (c *contention) watchedRead(ctx context.Context, path string) (node, error) {
	data, st, err := c.get(ctx, path)
	return node{data, st}, err
}

// createWithValue creates the contender's node, under the protection prefix (marked by
// markValue), and its value node, in one transaction; it answers the node's path and
// Stat (the value node's: the same transaction made both, so the czxid, the token, and
// the session are the node's too).
func (c *contention) createWithValue(ctx context.Context, prefix string) (string, *zk.Stat, error) {
	var res multiResponse
	var read getDataResponse
	errs, err := c.b.pipeline(ctx, c.createValueCalls(prefix, &res, &read)...)
	if err != nil {
		return "", nil, err
	}
	return createdWithValue(errs, &res, &read)
}

// createValueCalls returns the requests that create the contender's node, under prefix,
// and its value node, in one multi whose answer goes to res, and then read the value
// node into read: ZooKeeper 3.8 answers no Stat to a create2 inside a multi.
func (c *contention) createValueCalls(prefix string, res *multiResponse, read *getDataResponse) []rawCall {
	vpath, _ := c.valueNodeOf(c.child(prefix + latchName))
	return []rawCall{
		{opMulti, &multiRequest{acl: c.b.acl, ops: []multiOp{
			create2Op(c.child(prefix+latchName), c.data, zk.FlagEphemeralSequential),
			create2Op(vpath, []byte(c.p.Value), zk.FlagEphemeral),
		}}, res},
		{opGetData, &getDataRequest{Path: vpath}, read},
	}
}

// createdWithValue returns what the requests of createValueCalls answered (errs, res,
// read): the contender's node's path and Stat.
func createdWithValue(errs []error, res *multiResponse, read *getDataResponse) (string, *zk.Stat, error) {
	if errs[0] != nil {
		return "", nil, errs[0]
	}
	if err := res.failed(); err != nil {
		return "", nil, err
	}
	if errs[1] != nil || read.Stat.Czxid == 0 {
		// Created, but the read failed (the connection broke, or the value node was
		// deleted at once): the contender has its node, and reads its Stat when it
		// places it.
		return res.paths[0], nil, nil
	}
	return res.paths[0], &read.Stat, nil
}

// newProtection returns a fresh protection prefix for the contender's node, marked when
// the contender has a value.
func (c *contention) newProtection() string {
	if c.p.Value != "" {
		return markValue(newProtection())
	}
	return newProtection()
}
