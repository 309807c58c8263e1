package redis

import (
	"errors"
	"fmt"
	"io"
	"testing"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
)

// The answers the tests cannot draw from the Redis 7.0 they run, in the forms other
// versions give them, and the answers whose class depends on the kind of client.
func TestRefusesByAnswerAndClient(t *testing.T) {
	standalone := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"})
	sentinel := goredis.NewFailoverClient(&goredis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}})
	cluster := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { _, _, _ = standalone.Close(), sentinel.Close(), cluster.Close() })
	reply := func(msg string) error {
		return fmt.Errorf("failed to authenticate: %w", goredis.Error(errorReply(msg)))
	}
	for _, tc := range []struct {
		err                                 error
		onStandalone, onSentinel, onCluster bool // refused with a standalone, a Sentinel, a Cluster client
	}{
		{reply("NOAUTH Authentication required."), true, true, true},
		{reply("WRONGPASS invalid username-password pair or user is disabled."), true, true, true},
		{reply("ERR invalid password"), true, true, true},
		{reply("ERR Error running script (call to f_1): @user_script:1: @user_script: 1: -NOPERM this user has no permissions"), true, true, true},
		{reply("ERR Error running script (call to f_1): @user_script:1: @user_script: 1: The user executing the script can't run this command or subcommand"), true, true, true},
		{reply("ERR Error running script (call to f_1): @user_script:1: @user_script: 1: -READONLY You can't write against a read only replica."), true, false, false},
		{reply("READONLY You can't write against a read only replica."), true, false, false},
		{reply("MOVED 3999 127.0.0.1:6381"), true, false, false},
		{reply("ASK 3999 127.0.0.1:6381"), true, false, false},
		{reply("WRONGTYPE Operation against a key holding the wrong kind of value"), true, true, true},
		{reply("ERR Error running script (call to f_1): @user_script:1: @user_script: 1: -LOADING Redis is loading the dataset in memory"), false, false, false},
		{reply("OOM command not allowed when used memory > 'maxmemory'."), false, false, false},
		{reply("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."), false, false, false},
		{reply("TRYAGAIN Multiple keys request during rehashing of slot"), false, false, false},
		{reply("CLUSTERDOWN The cluster is down"), false, false, false},
		{reply("NOREPLICAS Not enough good replicas to write."), false, false, false},
		{reply("ERR max number of clients reached"), false, false, false},
		{reply("ERR something this package does not know"), false, false, false},
		{io.EOF, false, false, false},
		{errors.New("WRONGPASS in a message that is no answer"), false, false, false},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			assert.Equal(t, tc.onStandalone, refuses(standalone, tc.err), "standalone")
			assert.Equal(t, tc.onSentinel, refuses(sentinel, tc.err), "sentinel")
			assert.Equal(t, tc.onCluster, refuses(cluster, tc.err), "cluster")
		})
	}
}

// errorReply is an error answer of the server, as go-redis returns one it has no type for.
// A script that writes is refused, not failed, out of memory, on a replica and for an
// ACL user without the command, in the forms Redis 6 and 7 give.
func TestWriteRefused(t *testing.T) {
	for _, tc := range []struct {
		msg     string
		refused bool
	}{
		{"OOM command not allowed when used memory > 'maxmemory'.", true},
		{"READONLY You can't write against a read only replica.", true},
		{"ERR Error running script (call to f_1): @user_script:1: @user_script: 1: -READONLY You can't write against a read only replica.", true},
		{"NOPERM this user has no permissions to run the 'set' command", true},
		{"ERR Error running script (call to f_1): @user_script:1: @user_script: 1: The user executing the script can't run this command or subcommand", true},
		{"ERR user_script:1: Script attempted to access nonexistent global variable 'lookup'", false},
		{"WRONGTYPE Operation against a key holding the wrong kind of value", false},
		{"LOADING Redis is loading the dataset in memory", false},
	} {
		assert.Equal(t, tc.refused, writeRefused(goredis.Error(errorReply(tc.msg))), tc.msg)
	}
	assert.False(t, writeRefused(io.EOF), "no answer")
	assert.False(t, writeRefused(nil))
}

type errorReply string

func (e errorReply) Error() string { return string(e) }
func (errorReply) RedisError()     {}
