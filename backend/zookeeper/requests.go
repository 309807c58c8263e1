package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba"
)

// Every request the backend sends goes through ask, with a bound. go-zookeeper has no
// per-request timeout: a request lost on a connection that stays up (its pings get
// through) is waited for until the connection closes, which may be never. So each
// request runs on a goroutine of its own and its caller waits for it only until its
// context ends. go-zookeeper cannot take the request back: it goes on in the background
// (the connection ends it when it closes, and Close waits for that), its answer is
// dropped, and the caller cleans up what it might still do. A create is found again by
// its protection prefix (contention.join) or deleted by it (an orphan); a delete is
// retried by the keeper (an orphan); reads change nothing, and a watch they may still
// set only costs a look at the mutex when it fires.

// defaultBound bounds the requests the backend makes on its own before a session has
// told the negotiated timeout.
const defaultBound = 10 * time.Second

// bound is how long the backend waits for one request it makes on its own, outside any
// caller's call (a contention looking at its mutex, the keeper): the session timeout. A
// server that does not answer that long would have expired a session that sent nothing.
func (b *Backend) bound() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sess.timeout > 0 {
		return b.sess.timeout
	}
	return defaultBound
}

// ask runs f, one request of the connection, and returns its answer, or ctx's error if
// ctx ends first (see above).
func ask[T any](ctx context.Context, b *Backend, f func() (T, error)) (T, error) {
	type answer struct {
		v   T
		err error
	}
	got := make(chan answer, 1)
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return zero, fmt.Errorf("%w: %w", simba.ErrClosed, zk.ErrClosing)
	}
	b.wg.Go(func() { // under b.mu, so never after Close has begun to wait
		v, err := f()
		got <- answer{v, err}
	})
	b.mu.Unlock()
	select {
	case a := <-got:
		a.err = fromZK(a.err)
		b.heard(a.err)
		return a.v, a.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// heard records what an answer says of the session as a whole. When the server refuses
// every request of the session (errAuthRequired), it answers one and drops the connection,
// and the other requests, the next contention's among them, fail with the connection;
// explain names the refusal for them, until a request is answered otherwise.
func (b *Backend) heard(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case errors.Is(err, errAuthRequired):
		b.refusal = fmt.Errorf("%w: %w", simba.ErrRefused, err)
	case err == nil || !transient(err):
		b.refusal = nil
	}
}

// explain adds to err, the failure of a request, the refusal of the session that dropped
// its connection (see heard), if any.
func (b *Backend) explain(err error) error {
	if err == nil || !transient(err) || errors.Is(err, simba.ErrRefused) {
		return err
	}
	b.mu.Lock()
	r := b.refusal
	b.mu.Unlock()
	if r == nil {
		return err
	}
	return fmt.Errorf("%w, dropped after the server refused the session: %w", err, r)
}

// stat is what an exists request answers.
type stat struct {
	ok bool
	st *zk.Stat
}

// node is what a get request answers.
type node struct {
	data []byte
	st   *zk.Stat
}

func (b *Backend) children(ctx context.Context, path string) ([]string, error) {
	return ask(ctx, b, func() ([]string, error) {
		kids, _, err := b.conn.Children(path)
		return kids, err
	})
}

// childrenW lists path's children and sets a child watch; its event comes through the
// connection's callback.
func (b *Backend) childrenW(ctx context.Context, path string) ([]string, error) {
	return ask(ctx, b, func() ([]string, error) {
		kids, _, _, err := b.conn.ChildrenW(path)
		return kids, err
	})
}

func (b *Backend) exists(ctx context.Context, path string) (stat, error) {
	return ask(ctx, b, func() (stat, error) {
		ok, st, err := b.conn.Exists(path)
		return stat{ok, st}, err
	})
}

// existsW reads path's stat and sets a data watch; its event comes through the
// connection's callback.
func (b *Backend) existsW(ctx context.Context, path string) (stat, error) {
	return ask(ctx, b, func() (stat, error) {
		ok, st, _, err := b.conn.ExistsW(path)
		return stat{ok, st}, err
	})
}

func (b *Backend) get(ctx context.Context, path string) (node, error) {
	return ask(ctx, b, func() (node, error) {
		data, st, err := b.conn.Get(path)
		return node{data, st}, err
	})
}

// getW reads path's data and stat and sets a data watch; its event comes through the
// connection's callback.
func (b *Backend) getW(ctx context.Context, path string) (node, error) {
	return ask(ctx, b, func() (node, error) {
		data, st, _, err := b.conn.GetW(path)
		return node{data, st}, err
	})
}

func (b *Backend) create(ctx context.Context, path string, data []byte, flags int32) (string, error) {
	return ask(ctx, b, func() (string, error) {
		if flags == zk.FlagContainer {
			return b.createContainer(path, data)
		}
		return b.conn.Create(path, data, flags, b.acl)
	})
}

// createContainer is go-zookeeper's CreateContainer, but reads no answer after a failure:
// once the connection closes under a request, go-zookeeper's receiver may still decode an
// answer into it (go-zookeeper's own CreateContainer reads it then: a data race).
func (b *Backend) createContainer(path string, data []byte) (string, error) {
	var res createResponse
	req := &zk.CreateRequest{Path: path, Data: data, Acl: b.acl, Flags: zk.FlagContainer}
	if _, err := connRequest(b.conn, opCreateContainer, req, &res, nil); err != nil {
		return "", err
	}
	return res.Path, nil
}

func (b *Backend) delete(ctx context.Context, path string) error {
	_, err := ask(ctx, b, func() (struct{}, error) {
		return struct{}{}, b.conn.Delete(path, -1)
	})
	return err
}

// syncLeader sends a sync of path, which the server passes to the ensemble's leader: its
// answer comes through the leader, never from a server cut off from it.
func (b *Backend) syncLeader(ctx context.Context, path string) error {
	_, err := ask(ctx, b, func() (string, error) {
		return b.conn.Sync(path)
	})
	return err
}
