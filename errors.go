package simba

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Sentinel errors, for errors.Is; returned errors wrap them with detail.
var (
	// ErrInvalidArgument marks input rejected before any I/O, as an *ArgumentError.
	ErrInvalidArgument = errors.New("simba: invalid argument")
	// ErrAlreadyStarted is returned by Start unless the status is StatusInitial.
	ErrAlreadyStarted = errors.New("simba: already started")
	// ErrNotRunning is returned by Stop unless the status is StatusRunning.
	ErrNotRunning = errors.New("simba: not running")
	// ErrClosed is returned by calls after Close, and by backends after their own Close.
	ErrClosed = errors.New("simba: closed")
	// ErrNotAcquired is returned by a failed acquisition, matching ctx's error if ctx ended.
	ErrNotAcquired = errors.New("simba: not acquired")
	// ErrHeld (an ErrNotAcquired): another contender holds the mutex; the store did not fail.
	ErrHeld = fmt.Errorf("%w: held by another contender", ErrNotAcquired)
	// ErrNotOwner is returned by a release of what the caller does not hold, and by
	// backends when the store names another owner.
	ErrNotOwner = errors.New("simba: not the owner")
	// ErrNotWaiting is returned by a hand-off to a contender that does not wait for the mutex.
	ErrNotWaiting = errors.New("simba: not waiting")
	// ErrOwnershipLost is the cause (context.Cause) of a tenure context ended by a loss.
	ErrOwnershipLost = errors.New("simba: ownership lost")
	// ErrOwnerChanged is the loss by a store answer naming another owner, or none.
	ErrOwnerChanged = fmt.Errorf("%w: the store named another owner", ErrOwnershipLost)
	// ErrLeaseExpired is the loss by the local TTL end, without a successful renewal.
	ErrLeaseExpired = fmt.Errorf("%w: the local ttl end passed", ErrOwnershipLost)
	// ErrTimeout marks a store call cut off at the call timeout (WithCallTimeout) while
	// the caller's context was live; it does not match context.DeadlineExceeded.
	ErrTimeout = errors.New("simba: store call timed out")
	// ErrRefused marks a store answer no retry can cure (credentials, permissions,
	// schema, a read-only replica), as opposed to an outage.
	ErrRefused = errors.New("simba: the store refused the client")
	// ErrAlreadyHeld is returned by a Locker's acquisition while it holds or acquires a lease.
	ErrAlreadyHeld = errors.New("simba: locker already held")
	// ErrFencedOut is returned by a fenced write (backend helpers such as redis.FencedSet)
	// that a later tenure's token has already passed: the write was not made.
	ErrFencedOut = errors.New("simba: fenced out by a later tenure")
)

// ArgumentError is input rejected by validation; it wraps ErrInvalidArgument.
type ArgumentError struct {
	Field string // the rejected input, such as "ttl" or "mutex"
	Value string // the rejected value, formatted for the message
	Rule  string // what the value must satisfy
}

// Error formats the error as "simba: <field> <value>: <rule>".
func (e *ArgumentError) Error() string {
	return fmt.Sprintf("simba: %s %s: %s", e.Field, e.Value, e.Rule)
}

// Unwrap returns ErrInvalidArgument.
func (e *ArgumentError) Unwrap() error { return ErrInvalidArgument }

// invalid builds an *ArgumentError; the value is quoted when it is a string, and a long
// one is cut to its first quotedBytes bytes with its length: an error must stay a line
// (a name refused for its length may be a megabyte).
func invalid(field string, value any, rule string) error {
	var v string
	switch x := value.(type) {
	case string:
		v = fmt.Sprintf("%q", x)
		if len(x) > quotedBytes {
			cut := quotedBytes
			for cut > 0 && !utf8.RuneStart(x[cut]) {
				cut--
			}
			v = fmt.Sprintf("%q… (%d bytes)", x[:cut], len(x))
		}
	default:
		v = fmt.Sprint(x)
	}
	return &ArgumentError{Field: field, Value: v, Rule: rule}
}

// quotedBytes is how much of a string value an ArgumentError quotes.
const quotedBytes = 64

// InvalidArgument returns an *ArgumentError, for backends' own validation.
func InvalidArgument(field string, value any, rule string) error {
	return invalid(field, value, rule)
}

// timeoutError is a store call cut off at the call timeout. It keeps the store's message
// and every part of its error chain except the call context's error: that deadline was
// simba's, not the caller's.
type timeoutError struct {
	after time.Duration
	err   error
}

func (e *timeoutError) Error() string {
	return oneLine(fmt.Sprintf("store call timed out after %s (%s)", e.after, e.err))
}

func (e *timeoutError) Unwrap() []error { return append([]error{ErrTimeout}, contextFree(e.err)...) }

// contextFree returns the largest parts of err's tree that do not match a context error.
func contextFree(err error) []error {
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return []error{err}
	}
	var parts []error
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			parts = append(parts, contextFree(e)...)
		}
	case interface{ Unwrap() error }:
		if e := u.Unwrap(); e != nil {
			parts = contextFree(e)
		}
	}
	return parts
}

// callError returns the error of a store call as callers see it: a call that ended because
// its own context (call) did while the caller's (caller, nil if none) did not is a timeout
// of simba's, not a context error of the caller's.
func callError(err error, call, caller context.Context, timeout time.Duration) error {
	if err == nil || call.Err() == nil || (caller != nil && caller.Err() != nil) {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return &timeoutError{after: timeout, err: err}
	}
	return err
}

// describedError is one line that names a sentinel, a detail and causes, and matches the
// sentinel and every cause under errors.Is and errors.As.
type describedError struct {
	text string
	errs []error
}

func (e *describedError) Error() string   { return e.text }
func (e *describedError) Unwrap() []error { return e.errs }

// describe returns an error that reads as sentinel's text, then detail (if any), then each
// non-nil cause without a "simba: " prefix of its own, separated by ": ": one line with
// one prefix, where errors.Join would give one line per error and repeat the prefix.
func describe(sentinel error, detail string, causes ...error) error {
	var b strings.Builder
	b.WriteString(sentinel.Error())
	if detail != "" {
		b.WriteString(": ")
		b.WriteString(detail)
	}
	errs := []error{sentinel}
	for _, c := range causes {
		if c == nil {
			continue
		}
		text := strings.TrimPrefix(c.Error(), "simba: ")
		if strings.Contains(b.String(), text) {
			errs = append(errs, c) // already said: an error that wraps one named before
			continue
		}
		b.WriteString(": ")
		b.WriteString(text)
		errs = append(errs, c)
	}
	return &describedError{text: oneLine(b.String()), errs: errs}
}

// wrapf returns err with a prefix, on one line: what fmt.Errorf(format+": %w", args...,
// err) would give, with the line breaks of err's text (errors.Join's) turned into "; ".
func wrapf(err error, format string, args ...any) error {
	return &describedError{text: oneLine(fmt.Sprintf(format, args...) + ": " + err.Error()), errs: []error{err}}
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", "; ") }
