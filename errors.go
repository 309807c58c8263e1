package simba

import (
	"errors"
	"fmt"
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

	// ErrOwnershipLost is the cause (see context.Cause) of a tenure context that ended
	// because ownership was lost: the store named another owner, or the local TTL end
	// passed without a successful renewal. Lease.Release returns it, wrapped, when the
	// lease had been lost before it was released.
	ErrOwnershipLost = errors.New("simba: ownership lost")

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

// invalid builds an *ArgumentError; the value is quoted when it is a string.
func invalid(field string, value any, rule string) error {
	var v string
	switch x := value.(type) {
	case string:
		v = fmt.Sprintf("%q", x)
	default:
		v = fmt.Sprint(x)
	}
	return &ArgumentError{Field: field, Value: v, Rule: rule}
}

// InvalidArgument returns an *ArgumentError for backends and other packages that
// validate their own input the way simba does.
func InvalidArgument(field string, value any, rule string) error {
	return invalid(field, value, rule)
}
