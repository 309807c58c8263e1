package redis

import (
	"context"
	"errors"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// check verifies that the server answers and accepts the client, with a PING, and that it
// lets the client do what the scripts do (checkScript), once per backend: after the
// first success it is remembered and costs nothing; a failure is not remembered, so the
// next start checks again.
func (b *Backend) check(ctx context.Context) error {
	if b.checked.Load() {
		return nil
	}
	if err := b.client.Ping(ctx).Err(); err != nil {
		return b.checkError(ctx, err)
	}
	if err := b.scripts.run(ctx, checkScript, newKeyList(checkKey)).Err(); err != nil {
		return b.checkError(ctx, err)
	}
	b.checked.Store(true)
	return nil
}

// checkScript runs a script with a write command and a PUBLISH, neither of which changes
// anything: a server that is a read-only replica (READONLY), or an ACL user that may not
// run scripts or publish (NOPERM; Redis 7 gives new users no channels), refuses it, where
// PING passes and every acquisition would fail until its caller's deadline. (The acquire
// script writes the owner key before it publishes, and scripts do not roll back: without
// the check, a user that may write but not publish would leave owner keys that nobody
// believes in.) checkKey is in simba's key space, for ACL key patterns, and is no mutex's
// key nor any contender's channel (see the package doc, Keys and channels).
var checkScript = &script{name: "check", eval: goredis.NewScript(checkLua), code: checkLua}

const checkLua = `redis.call('DEL', KEYS[1])
redis.call('PUBLISH', KEYS[1], '')
return 1`

const checkKey = "simba:{simba}:@@check"

// checkError returns the error of a failed start-up check: one line, matching ErrRefused
// for a refusal (see refuses) or ErrUnreachable for an outage, the client's error and,
// when ctx had ended, ctx.Err().
func (b *Backend) checkError(ctx context.Context, err error) error {
	if refuses(b.client, err) {
		return failure(ctx, "server refused the client", err, ErrRefused)
	}
	state := "unreachable"
	if errors.As(err, new(goredis.Error)) {
		state = "unavailable" // it answered: that it cannot serve now
	}
	what := "server " + state
	if addr := addrOf(b.client); addr != "" {
		what = "server " + addr + " " + state
	}
	return failure(ctx, what, err, ErrUnreachable)
}

// addrOf returns the address(es) a client dials, or "" when it cannot tell.
func addrOf(client goredis.UniversalClient) string {
	switch c := client.(type) {
	case *goredis.Client:
		if addr := c.Options().Addr; addr != failoverAddr {
			return addr
		}
	case *goredis.ClusterClient:
		return strings.Join(c.Options().Addrs, ",")
	}
	return ""
}
