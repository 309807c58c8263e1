package zookeeper

import (
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/go-zookeeper/zk"
)

// TestConnectionErrorsAreTransient checks what a request that broke with its connection
// reports: go-zookeeper hands a request the raw error of a failed write ("write: connection
// reset by peer", "broken pipe"), not only zk.ErrConnectionClosed. Such a request's outcome
// is unknown: a delete of a stopping contention's node must be left to the backend (the
// chaos suite's zookeeper/14 saw a node stay at the head of the queue, nobody acquiring,
// when it was not), and a first read must be retried rather than fail the start.
func TestConnectionErrorsAreTransient(t *testing.T) {
	op := func(what string, errno syscall.Errno) error {
		return &net.OpError{Op: what, Net: "tcp", Err: &os.SyscallError{Syscall: what, Err: errno}}
	}
	for _, err := range []error{
		op("write", syscall.ECONNRESET),
		op("write", syscall.EPIPE),
		op("read", syscall.ECONNRESET),
		io.EOF,
		net.ErrClosed,
		zk.ErrConnectionClosed,
		fmt.Errorf("simba/zookeeper: delete /simba/m/n: %w", op("write", syscall.ECONNRESET)),
	} {
		if !transient(err) {
			t.Errorf("transient(%v) = false: a request that broke with its connection has an unknown outcome", err)
		}
	}
	for _, err := range []error{zk.ErrNoNode, zk.ErrNodeExists, zk.ErrNoAuth, zk.ErrBadArguments} {
		if transient(err) {
			t.Errorf("transient(%v) = true: that is the server's answer", err)
		}
	}
}
