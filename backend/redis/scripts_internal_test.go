package redis

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A script gets the prelude's declarations it uses, directly or through another, and no
// other: a renewal needs no grant, and names in comments and strings are no uses.
func TestWithPreludeTakesWhatTheScriptUses(t *testing.T) {
	guard := withPrelude(guardLua)
	for _, used := range []string{"local function renew(", "local function writeToken(", "local function joinFence(", "local tokenKey ="} {
		assert.Contains(t, guard, used)
	}
	for _, unused := range []string{"local function grant(", "local function register(", "local grantKey =", "local function isGreater("} {
		assert.NotContains(t, guard, unused)
	}
	assert.True(t, strings.HasPrefix(guard, preludeHead))
	assert.True(t, strings.HasSuffix(guard, guardLua))

	body := "-- grant(), register()\nreturn redis.call('get', 'millis')\n"
	assert.Equal(t, preludeHead+body, withPrelude(body))
}
