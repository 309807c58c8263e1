package redis

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// In a script with laterMark, the declarations only the code after it uses come after
// it: a contended acquire, which returns before it, does not create the closures of
// taking the mutex. One both parts use comes first, once.
func TestWithPreludeDeclaresLateWhatOnlyTheRestUses(t *testing.T) {
	acquire := withPrelude(acquireLua)
	early, late, ok := strings.Cut(acquire, laterMark)
	require.True(t, ok)
	for _, first := range []string{"local function register(", "local function enqueue(", "local function readOwner(", "local function millis("} {
		assert.Contains(t, early, first)
		assert.NotContains(t, late, first)
	}
	for _, later := range []string{"local function newToken(", "local function writeToken(", "local function beginTenure(", "local function renew(", "local function leave("} {
		assert.NotContains(t, early, later)
		assert.Contains(t, late, later)
	}

	body := "local a = millis\n" + laterMark + "local b = millis, isToken\n"
	got := withPrelude(body)
	assert.Equal(t, 1, strings.Count(got, "local function millis("))
	assert.Less(t, strings.Index(got, "local function millis("), strings.Index(got, laterMark))
	assert.Greater(t, strings.Index(got, "local function isToken("), strings.Index(got, laterMark))
}
