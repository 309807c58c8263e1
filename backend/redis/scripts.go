package redis

import (
	_ "embed" // the Lua scripts

	goredis "github.com/redis/go-redis/v9"
)

// The scripts, each wrapped once: Run uses EVALSHA and falls back to EVAL when the server
// does not know the script yet (after a restart, on a new cluster node).
var (
	//go:embed prelude.lua
	preludeLua string
	//go:embed acquire.lua
	acquireLua string
	//go:embed guard.lua
	guardLua string
	//go:embed release.lua
	releaseLua string
	//go:embed lookup.lua
	lookupLua string
	//go:embed raise.lua
	raiseLua string
	//go:embed waiting.lua
	waitingLua string

	acquireScript = goredis.NewScript(preludeLua + acquireLua)
	guardScript   = goredis.NewScript(preludeLua + guardLua)
	releaseScript = goredis.NewScript(preludeLua + releaseLua)
	lookupScript  = goredis.NewScript(preludeLua + lookupLua)
	raiseScript   = goredis.NewScript(preludeLua + raiseLua)
	waitingScript = goredis.NewScript(preludeLua + waitingLua)
)
