package zookeeper

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"
)

// go-zookeeper v1.0.4's Multi cannot decode the answer of a create2 inside a multi,
// which carries the node's Stat from some servers. The backend encodes the multi that
// creates a contender's node and its value node in one transaction itself, in
// ZooKeeper's wire format (jute), and sends it as a raw request (see raw.go), pipelined
// with the read that follows it.

const opMulti = 14

// ZooKeeper's operation codes in a multi's answer, besides opCreate2.
const (
	opMultiCreate = 1
	opMultiError  = -1
)

// multiOp is one operation of a multi: a create2.
type multiOp struct {
	path  string
	data  []byte
	flags int32
}

func create2Op(path string, data []byte, flags int32) multiOp {
	return multiOp{path: path, data: data, flags: flags}
}

// multiRequest is a multi's request body, encoded by its Encode method (go-zookeeper
// calls it for any request that has one).
type multiRequest struct {
	ops []multiOp
	acl []zk.ACL
}

// Encode writes r as ZooKeeper's MultiOperationRecord: each operation after its header
// (type, done = false, error -1), then a header with done = true.
func (r *multiRequest) Encode(buf []byte) (int, error) {
	var w juteWriter
	for _, o := range r.ops {
		w.header(opCreate2, false)
		w.string(o.path)
		w.bytes(o.data)
		w.int32(int32(len(r.acl)))
		for _, a := range r.acl {
			w.int32(a.Perms)
			w.string(a.Scheme)
			w.string(a.ID)
		}
		w.int32(o.flags)
	}
	w.header(-1, true)
	if len(w.b) > len(buf) {
		return 0, zk.ErrShortBuffer
	}
	return copy(buf, w.b), nil
}

// multiResponse is a multi's answer: each operation's error (nil when it succeeded) and,
// for a create2, its node's path (its Stat, which servers other than 3.8 answer, is
// dropped: see createValueCalls).
type multiResponse struct {
	errs  []error
	paths []string
}

// Decode reads ZooKeeper's MultiResponse. A failed multi answers an error result for every
// operation: the failing one's code, zero for those before it, and RUNTIMEINCONSISTENCY
// (-2) for those after it.
func (r *multiResponse) Decode(buf []byte) (int, error) {
	rd := juteReader{b: buf}
	for {
		typ, done, code := rd.int32(), rd.bool(), rd.int32()
		if rd.short || done {
			break
		}
		var (
			err  error
			path string
		)
		switch typ {
		case opMultiError:
			err = codeError(rd.int32())
		case opMultiCreate: // ZooKeeper 3.8 answers a create2 of a multi so, without the Stat
			path = rd.string()
		case opCreate2:
			path = rd.string()
			rd.take(statLen)
		default:
			return rd.n, fmt.Errorf("simba/zookeeper: multi answered operation %d, which it did not send: %w", typ, zk.ErrAPIError)
		}
		if code != 0 && err == nil {
			err = codeError(code)
		}
		r.errs, r.paths = append(r.errs, err), append(r.paths, path)
	}
	if rd.short {
		return rd.n, zk.ErrShortBuffer
	}
	return rd.n, nil
}

// failed returns the error of the operation that failed the multi, a *multiOpError; nil
// when every operation succeeded.
func (r *multiResponse) failed() error {
	for i, err := range r.errs {
		if err != nil && !errors.Is(err, errRuntimeInconsistency) {
			return &multiOpError{op: i, err: err}
		}
	}
	return nil
}

// multiOpError is the error of the operation of a multi that failed it.
type multiOpError struct {
	op  int // its place in the multi
	err error
}

func (e *multiOpError) Error() string {
	return fmt.Sprintf("operation %d of the multi: %v", e.op, e.err)
}
func (e *multiOpError) Unwrap() error { return e.err }

// errRuntimeInconsistency is RUNTIMEINCONSISTENCY (-2): in a failed multi, an operation
// after the one that failed.
var errRuntimeInconsistency = errors.New("zk: operation not run: an earlier operation of the multi failed")

// codeError returns go-zookeeper's error for a ZooKeeper error code; nil for zero.
func codeError(code int32) error {
	switch code {
	case 0:
		return nil
	case -2:
		return errRuntimeInconsistency
	case -8:
		return zk.ErrBadArguments
	case -101:
		return zk.ErrNoNode
	case -102:
		return zk.ErrNoAuth
	case -103:
		return zk.ErrBadVersion
	case -108:
		return zk.ErrNoChildrenForEphemerals
	case -110:
		return zk.ErrNodeExists
	case -111:
		return zk.ErrNotEmpty
	case -112:
		return zk.ErrSessionExpired
	case -114:
		return zk.ErrInvalidACL
	case -118:
		return zk.ErrSessionMoved
	}
	return fromZK(fmt.Errorf("unknown error: %d", code)) // as go-zookeeper reports a code it does not name
}

// juteWriter encodes ZooKeeper's wire format: big-endian integers, byte strings after
// their length.
type juteWriter struct{ b []byte }

func (w *juteWriter) int32(v int32) { w.b = binary.BigEndian.AppendUint32(w.b, uint32(v)) }

func (w *juteWriter) bytes(p []byte) {
	if p == nil {
		w.int32(-1)
		return
	}
	w.int32(int32(len(p)))
	w.b = append(w.b, p...)
}

func (w *juteWriter) string(s string) {
	w.int32(int32(len(s)))
	w.b = append(w.b, s...)
}

func (w *juteWriter) header(op int32, done bool) {
	w.int32(op)
	if done {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
	w.int32(-1)
}

// juteReader decodes ZooKeeper's wire format; short is set once it ran out of bytes.
type juteReader struct {
	b     []byte
	n     int
	short bool
}

func (r *juteReader) take(k int) []byte {
	if k < 0 || r.n+k > len(r.b) {
		r.short = true
		return nil
	}
	p := r.b[r.n : r.n+k]
	r.n += k
	return p
}

func (r *juteReader) int32() int32 {
	p := r.take(4)
	if p == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(p))
}

func (r *juteReader) bool() bool {
	p := r.take(1)
	return p != nil && p[0] != 0
}

func (r *juteReader) string() string {
	n := r.int32()
	if n <= 0 {
		return ""
	}
	return string(r.take(int(n)))
}

// statLen is the length of an encoded Stat: six longs and five ints.
const statLen = 6*8 + 5*4
