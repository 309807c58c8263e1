package simba

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Sentinel errors. Test for them with errors.Is; the errors simba returns wrap them with
// the detail of the case at hand.
var (
	// ErrInvalidArgument marks input that simba rejects before doing any I/O: a blank
	// mutex name, a non-positive TTL, a nil context and the like. The error that wraps it
	// is an *ArgumentError naming the field, the value and the rule.
	ErrInvalidArgument = errors.New("simba: invalid argument")

	// ErrAlreadyStarted is returned by Start when the service is not in StatusInitial.
	ErrAlreadyStarted = errors.New("simba: already started")

	// ErrNotRunning is returned by Stop when the service is not in StatusRunning.
	ErrNotRunning = errors.New("simba: not running")

	// ErrClosed is returned by any lifecycle call on a service, locker or scheduler after
	// Close, and by backends used after their own Close.
	ErrClosed = errors.New("simba: closed")

	// ErrNotAcquired is returned when an acquisition did not make the caller the owner:
	// TryAcquire found another owner, or Acquire's context ended first (then the error
	// also matches the context's error).
	ErrNotAcquired = errors.New("simba: not acquired")

	// ErrNotOwner is returned when an operation needs ownership that the caller does not
	// have, such as releasing a lease twice. Backends return it (wrapped) when the store
	// names another owner for an operation that needs this contender to own the mutex.
	ErrNotOwner = errors.New("simba: not the owner")

	// ErrOwnershipLost is matched by the cause (see context.Cause) of a tenure context
	// that ended because ownership was lost: the store named another owner
	// (ErrOwnerChanged), or the local TTL end passed without a successful renewal
	// (ErrLeaseExpired). Lease.Release returns it, wrapped, when the lease had been lost
	// before it was released.
	ErrOwnershipLost = errors.New("simba: ownership lost")

	// ErrOwnerChanged is the cause of a tenure context that ended because the store named
	// another owner, or none (a session store that lost its session names none). It
	// matches ErrOwnershipLost.
	ErrOwnerChanged = fmt.Errorf("%w: the store named another owner", ErrOwnershipLost)

	// ErrLeaseExpired is the cause of a tenure context that ended because its local TTL
	// end passed without a successful renewal. It matches ErrOwnershipLost. When
	// renewals failed, the cause Observer.OnTenureEnded is told also wraps the last store
	// error.
	ErrLeaseExpired = fmt.Errorf("%w: the local ttl end passed", ErrOwnershipLost)

	// ErrTimeout marks a store call that simba cut off at its call timeout
	// (WithCallTimeout) while the caller's context was still live. Such errors do not
	// match context.DeadlineExceeded: simba's errors match a context error only when the
	// caller's own context ended.
	ErrTimeout = errors.New("simba: store call timed out")

	// ErrRefused marks a store's answer that no retry can cure: wrong credentials, a
	// missing permission, a missing or malformed table, a read-only replica, a malformed
	// option. Backends wrap such answers in it, and nothing else: an outage (no answer, a
	// timeout, a reset connection, a server still loading) is not a refusal. Start and
	// every acquisition end at once on a refusal, with the store's message; a running
	// service keeps retrying it (a password may be rotated back), logs each at Error
	// level, and its health fails meanwhile.
	ErrRefused = errors.New("simba: the store refused the client")

	// ErrAlreadyHeld is returned by Locker.Acquire and Locker.TryAcquire while the locker
	// holds a lease that has not been released, or while another acquisition on the same
	// locker is under way. A Locker is one contender; use one Locker per concurrent holder.
	ErrAlreadyHeld = errors.New("simba: locker already held")
)

// ArgumentError describes input rejected by validation. It wraps ErrInvalidArgument.
type ArgumentError struct {
	// Field names the rejected input, such as "ttl" or "mutex".
	Field string
	// Value is the rejected value, formatted for the message.
	Value string
	// Rule says what the value must satisfy.
	Rule string
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

// InvalidArgument returns an *ArgumentError for backends and other packages that
// validate their own input the way simba does.
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
