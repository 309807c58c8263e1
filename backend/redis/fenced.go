package redis

import (
	"context"
	_ "embed" // the fenced write's script
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba"
)

//go:embed fenced.lua
var fencedLua string

var fencedScript = goredis.NewScript(fencedLua)

// FencedSet sets key to value (expiring after ttl, if positive) unless a write through
// fence carried a greater token, and raises fence to token, in one script: a holder whose
// tenure has ended cannot overwrite what a later tenure wrote. A write fenced out changes
// nothing and returns an error matching simba.ErrFencedOut. fence and key must hash to
// one Cluster slot: give them one hash tag ("{orders}:fence", "{orders}:state").
//
//	err := redis.FencedSet(ctx, client, "{orders}:fence", "{orders}:state", v, 0, lease.Token())
func FencedSet(ctx context.Context, c goredis.Scripter, fence, key string, value any, ttl time.Duration, token uint64) error {
	switch {
	case c == nil:
		return simba.InvalidArgument("client", nil, "must not be nil")
	case fence == "":
		return simba.InvalidArgument("fence", fence, "must not be empty")
	case key == "" || key == fence:
		return simba.InvalidArgument("key", key, "must be neither empty nor the fence key")
	case token == 0:
		return simba.InvalidArgument("token", token, "must be a tenure's fencing token (a JVM Simba owner has none)")
	case ttl < 0 || (ttl > 0 && ttl < time.Millisecond):
		return simba.InvalidArgument("ttl", ttl, "must be 0 (no expiry) or at least 1ms")
	}
	written, err := fencedScript.Run(ctx, c, []string{fence, key},
		strconv.FormatUint(token, 10), value, ttl.Milliseconds()).Int()
	switch {
	case err != nil:
		return fmt.Errorf("simba/redis: fenced set of %q: %w", key, err)
	case written == 0:
		return fmt.Errorf("simba/redis: fenced set of %q with token %d: %w", key, token, simba.ErrFencedOut)
	}
	return nil
}
