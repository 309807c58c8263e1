package zookeeper

import (
	"context"
	"errors"
	"reflect"
	"runtime"
	"strings"
	"unsafe"

	"github.com/go-zookeeper/zk"
)

// go-zookeeper v1.0.4 has no API for three requests the queue watch needs (see queue.go):
// addWatch (ZooKeeper 3.6), removeWatches (3.5) and create2 (3.5), a create that answers
// the new node's Stat; nor a way to send requests one after the other without waiting for
// each answer. Its connection queues every request through one unexported method,
// (*zk.Conn).queueRequest, which takes a request struct that the connection encodes field
// by field, in order, as ZooKeeper's wire format (jute) does, and returns the channel of
// the answer, decoded the same way into the answer struct; (*zk.Conn).request waits for
// that channel. The requests below go through them, on the backend's own connection and
// session, in order with every other request, and their watch events come through the
// connection's callback like any other. The methods are linked by name, so their
// signatures are checked only by the version of go-zookeeper they come from: rawRequests
// says whether that is the version they were written for; with any other the backend
// watches per node only.

//go:linkname connRequest github.com/go-zookeeper/zk.(*Conn).request
func connRequest(c *zk.Conn, opcode int32, req, res any, recvFunc func(unsafe.Pointer, unsafe.Pointer, error)) (int64, error)

//go:linkname connQueue github.com/go-zookeeper/zk.(*Conn).queueRequest
func connQueue(c *zk.Conn, opcode int32, req, res any, recvFunc func(unsafe.Pointer, unsafe.Pointer, error)) <-chan rawAnswer

// rawAnswer is go-zookeeper's answer to a queued request (its unexported response),
// field for field.
type rawAnswer struct {
	_   int64 // the zxid of the answer, which no caller needs
	err error
}

// rawRequests reports whether connRequest and connQueue are linked to the methods of
// go-zookeeper v1.0.4, the ones they were written for: the source file of each function
// linked lies in that module version's directory (also with -trimpath). A replaced or
// vendored go-zookeeper does not qualify.
var rawRequests = func() bool {
	for _, fn := range []any{connRequest, connQueue} {
		f := runtime.FuncForPC(reflect.ValueOf(fn).Pointer())
		if f == nil {
			return false
		}
		if file, _ := f.FileLine(f.Entry()); !strings.HasSuffix(file, "github.com/go-zookeeper/zk@v1.0.4/conn.go") {
			return false
		}
	}
	return true
}()

// ZooKeeper's operation codes and request fields for the raw requests.
const (
	opDelete          = 2
	opGetData         = 4
	opGetChildren2    = 12
	opCreate2         = 15
	opRemoveWatches   = 18
	opCreateContainer = 19
	opAddWatch        = 106

	addWatchPersistentRecursive = 1 // AddWatchMode.PERSISTENT_RECURSIVE
	watcherTypeAny              = 3 // WatcherType.Any: ZooKeeper 3.8 removes a persistent watch only with it
)

type addWatchRequest struct {
	Path string
	Mode int32
}

type removeWatchesRequest struct {
	Path string
	Type int32
}

type create2Response struct {
	Path string
	Stat zk.Stat
}

type getDataRequest struct {
	Path  string
	Watch bool
}

type getDataResponse struct {
	Data []byte
	Stat zk.Stat
}

type getChildren2Request struct {
	Path  string
	Watch bool
}

type getChildren2Response struct {
	Children []string
	Stat     zk.Stat
}

type createResponse struct {
	Path string
}

type emptyResponse struct{}

// ZooKeeper's answers to raw requests that go-zookeeper does not name (it reports
// "unknown error: <code>"; fromZK turns them into these).
var (
	// errUnimplemented is UNIMPLEMENTED (-6): a server older than 3.6 does not know
	// addWatch. It closes the connection after this answer.
	errUnimplemented = errors.New("zk: operation not implemented by the server (UNIMPLEMENTED)")
	// errNoWatcher is NOWATCHER (-121): removeWatches found no watch to remove.
	errNoWatcher = errors.New("zk: no watcher to remove (NOWATCHER)")
)

// removeWatches removes every watch this session holds on path (the persistent one with
// them: ZooKeeper 3.8 removes it only together with the others).
func (b *Backend) removeWatches(ctx context.Context, path string) error {
	_, err := ask(ctx, b, func() (struct{}, error) {
		_, err := connRequest(b.conn, opRemoveWatches, &removeWatchesRequest{Path: path, Type: watcherTypeAny}, &emptyResponse{}, nil)
		return struct{}{}, err
	})
	return err
}

// rawCall is one request of a pipeline: its operation code, request and answer structs.
type rawCall struct {
	op       int32
	req, res any
}

// pipeline sends calls one after the other without waiting for an answer in between, and
// returns the error of each once all are answered: ZooKeeper answers a session's requests
// in the order they were sent, so the pipeline costs one round trip. err is ctx's error
// when ctx ended first (the outcome of every call is then unknown).
func (b *Backend) pipeline(ctx context.Context, calls ...rawCall) (errs []error, err error) {
	return ask(ctx, b, func() ([]error, error) {
		answers := make([]<-chan rawAnswer, len(calls))
		for i, c := range calls {
			answers[i] = connQueue(b.conn, c.op, c.req, c.res, nil)
		}
		errs := make([]error, len(calls))
		for i, a := range answers {
			select {
			case got := <-a:
				errs[i] = fromZK(got.err)
				b.heard(errs[i])
			case <-b.quit:
				// Closing: a request queued as the connection closed may get no answer
				// ((*zk.Conn).request waits for the connection's own quit channel there).
				errs[i] = zk.ErrClosing
			}
		}
		return errs, nil
	})
}

// create2 creates a node and returns its path and Stat.
func (b *Backend) create2(ctx context.Context, path string, data []byte, flags int32) (create2Response, error) {
	return ask(ctx, b, func() (create2Response, error) {
		var res create2Response
		if _, err := connRequest(b.conn, opCreate2, &zk.CreateRequest{Path: path, Data: data, Acl: b.acl, Flags: flags}, &res, nil); err != nil {
			// Not res: after a failure (the connection closing) go-zookeeper's receiver may
			// still be decoding an answer into it.
			return create2Response{}, err
		}
		return res, nil
	})
}
