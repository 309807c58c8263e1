package redis

import "errors"

// ErrUnexpectedReply is returned, wrapped with the reply, when Redis answers a script in a
// shape this package does not write: typically another program's data under a simba key.
// The answer is then unknown to the caller, as with any store error.
var ErrUnexpectedReply = errors.New("simba/redis: unexpected reply")
