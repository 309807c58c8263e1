// Package goroutine tells goroutines apart. Go gives goroutines no identity on purpose;
// simba needs one in a single place: a Stop called from inside one of the service's own
// callbacks must not wait for that callback to return. The number comes from the header
// of the goroutine's stack trace, as golang.org/x/net/http2 reads it for its own checks.
// Stacks gives the checks of leftover goroutines (tests, the conformance suite) every
// goroutine's trace.
package goroutine

import (
	"bytes"
	"runtime"
	"strconv"
)

// ID returns the calling goroutine's number, or 0 if it cannot be read. It costs a
// stack trace of one frame (about a microsecond): call it on rare paths only.
func ID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b, ok := bytes.CutPrefix(b, []byte("goroutine "))
	if !ok {
		return 0
	}
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	n, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// Stacks returns the stack trace of every goroutine, one string each, as runtime.Stack
// writes them ("goroutine N [state]:", then its frames).
func Stacks() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, block := range bytes.Split(buf, []byte("\n\n")) {
		out = append(out, string(block))
	}
	return out
}
