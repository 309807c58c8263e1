package zookeeper

import (
	"errors"
	"testing"

	"github.com/go-zookeeper/zk"
)

// result writes one result of a multi's answer: its header, then its body.
func (w *juteWriter) result(op, code int32, body func()) {
	w.int32(op)
	w.b = append(w.b, 0) // not done
	w.int32(code)
	if body != nil {
		body()
	}
}

// A failed multi answers an error result for each operation: zero for those before the
// one that failed, its code, and RUNTIMEINCONSISTENCY after it.
func TestMultiResponseFailed(t *testing.T) {
	var w juteWriter
	for _, code := range []int32{0, -101, -2} {
		w.result(opMultiError, code, func() { w.int32(code) })
	}
	w.header(-1, true)
	var r multiResponse
	n, err := r.Decode(w.b)
	if err != nil || n != len(w.b) {
		t.Fatalf("Decode = %d, %v; want %d, nil", n, err, len(w.b))
	}
	var opErr *multiOpError
	if err := r.failed(); !errors.As(err, &opErr) || opErr.op != 1 || !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("failed() = %v; want operation 1's zk.ErrNoNode", err)
	}
}

// Any bytes decode to an answer or an error, never a panic or a read past the buffer.
func FuzzMultiResponseDecode(f *testing.F) {
	var ok juteWriter // a create2 answered as a create (ZooKeeper 3.8), then as a create2
	ok.result(opMultiCreate, 0, func() { ok.string("/simba/m/_c_x-latch-0000000001") })
	ok.result(opCreate2, 0, func() { ok.string("/simba-value/m/_c_x"); ok.b = append(ok.b, make([]byte, statLen)...) })
	ok.header(-1, true)
	f.Add(ok.b)
	f.Fuzz(func(t *testing.T, buf []byte) {
		var r multiResponse
		n, err := r.Decode(buf)
		if n > len(buf) {
			t.Fatalf("read %d bytes of %d", n, len(buf))
		}
		if err == nil && len(r.errs) != len(r.paths) {
			t.Fatalf("%d errors for %d paths", len(r.errs), len(r.paths))
		}
	})
}
