// Package await waits for the answer of a call made on another goroutine, within the
// caller's context.
package await

import (
	"context"
	"runtime"
)

// Answer returns the value out delivers, or false once ctx has ended without one. A
// callee that honours the same context returns at that moment too, with an error that
// says what it was waiting for: it is let run once, and its answer taken if it came.
func Answer[T any](ctx context.Context, out <-chan T) (T, bool) {
	select {
	case v := <-out:
		return v, true
	case <-ctx.Done():
	}
	runtime.Gosched()
	select {
	case v := <-out:
		return v, true
	default:
		var zero T
		return zero, false
	}
}
