package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// check verifies that the server answers and accepts the client, with a PING, once per
// backend: after the first success it is remembered and costs nothing; a failure is not
// remembered, so the next start checks again.
func (b *Backend) check(ctx context.Context) error {
	if b.checked.Load() {
		return nil
	}
	if err := b.client.Ping(ctx).Err(); err != nil {
		return newCheckError(ctx, b.client, err)
	}
	b.checked.Store(true)
	return nil
}

// checkError is a failed start-up check. Its message is one line; it matches its kind,
// ErrUnreachable or ErrRefused, the store's error and, when ctx had ended, ctx.Err().
type checkError struct {
	kind   error
	detail string // "server <addr> unreachable: <cause>" or "server refused the client: <cause>"
	causes []error
}

func newCheckError(ctx context.Context, client goredis.UniversalClient, err error) *checkError {
	e := &checkError{kind: ErrUnreachable, causes: []error{err}}
	var refused goredis.Error
	switch {
	case errors.As(err, &refused):
		e.kind = ErrRefused
		e.detail = fmt.Sprintf("server refused the client: %v", err)
	case addrOf(client) != "":
		e.detail = fmt.Sprintf("server %s unreachable: %v", addrOf(client), err)
	default:
		e.detail = fmt.Sprintf("server unreachable: %v", err)
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		e.detail += " (" + cerr.Error() + ")"
		e.causes = append(e.causes, cerr)
	}
	return e
}

func (e *checkError) Error() string   { return "simba/redis: " + e.detail }
func (e *checkError) Unwrap() []error { return append([]error{e.kind}, e.causes...) }

// addrOf returns the address(es) a client dials, or "" when it cannot tell.
func addrOf(client goredis.UniversalClient) string {
	switch c := client.(type) {
	case *goredis.Client:
		if addr := c.Options().Addr; addr != "FailoverClient" { // a Sentinel client's placeholder
			return addr
		}
	case *goredis.ClusterClient:
		return strings.Join(c.Options().Addrs, ",")
	}
	return ""
}
