package redis

import (
	"errors"
	"strings"
)

// ErrUnexpectedReply is returned, wrapped with the reply, when Redis answers a script in a
// shape this package does not write: typically another program's data under a simba key.
// The answer is then unknown to the caller, as with any store error.
var ErrUnexpectedReply = errors.New("simba/redis: unexpected reply")

// Errors of the start-up check (see Backend.StartContend), each wrapped together with its
// cause.
var (
	// ErrUnreachable: the server did not answer (refused the connection, timed out).
	ErrUnreachable = errors.New("simba/redis: server unreachable")
	// ErrRefused: the server answered with an error: typically NOAUTH or WRONGPASS, or
	// READONLY (a replica) or NOPERM (an ACL user without the scripts' permissions).
	ErrRefused = errors.New("simba/redis: server refused the client")
)

// backendError is an error of this package: one line, with the package's prefix once, that
// matches each of its causes.
type backendError struct {
	detail string // the message without the prefix
	causes []error
}

func (e *backendError) Error() string   { return "simba/redis: " + e.detail }
func (e *backendError) Unwrap() []error { return e.causes }

// wrap returns an error "simba/redis: <what>: <cause>" (or "simba/redis: <cause>" when
// what is empty) that matches cause and also, and whose message names each cause once
// and the prefix once.
func wrap(what string, cause error, also ...error) error {
	detail := bare(cause)
	if what != "" {
		detail = what + ": " + detail
	}
	for _, a := range also {
		detail += " (" + bare(a) + ")"
	}
	return &backendError{detail: detail, causes: append([]error{cause}, also...)}
}

// bare returns err's message without this package's prefix, for an error that goes into
// another's message.
func bare(err error) string { return strings.ReplaceAll(err.Error(), "simba/redis: ", "") }

// joined returns the messages of errs on one line.
func joined(errs []error) string {
	parts := make([]string, len(errs))
	for i, err := range errs {
		parts[i] = bare(err)
	}
	return strings.Join(parts, "; ")
}
