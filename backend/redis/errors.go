package redis

import "errors"

// ErrUnexpectedReply is returned, wrapped with the reply, when Redis answers a script in a
// shape this package does not write: typically another program's data under a simba key.
// The answer is then unknown to the caller, as with any store error.
var ErrUnexpectedReply = errors.New("simba/redis: unexpected reply")

// Errors of the start-up check (see Backend.StartContend), each wrapped together with its
// cause.
var (
	// ErrUnreachable: the server did not answer (refused the connection, timed out).
	ErrUnreachable = errors.New("simba/redis: server unreachable")
	// ErrRefused: the server answered with an error, typically NOAUTH or WRONGPASS.
	ErrRefused = errors.New("simba/redis: server refused the client")
)
