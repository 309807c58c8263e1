package redis

import (
	"errors"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// refuses reports whether err is an answer of the server that no retry can cure, for a
// backend on client: the table "Refusals and outages" of the package documentation.
// Anything else, an answer this package does not know included, is an outage: retried.
func refuses(client goredis.UniversalClient, err error) bool {
	var reply goredis.Error
	if !errors.As(err, &reply) {
		return false // no answer: a dial, a timeout, a reset connection
	}
	msg := reply.Error()
	code, text := replyCode(msg)
	switch code {
	case "NOAUTH", "WRONGPASS", "NOPERM", "WRONGTYPE":
		return true
	case "READONLY", "MOVED", "ASK":
		// A replica, or a Cluster node behind a standalone client, stays one until the
		// configuration changes. (go-redis has already tried READONLY again on new
		// connections, for an address that a failover moves to the new primary.) A
		// Sentinel or Cluster client meets them only while it follows a failover or a
		// slot's move.
		return fixedServer(client)
	case "ERR":
		for _, prefix := range refusedERR {
			if strings.HasPrefix(text, prefix) {
				return true
			}
		}
		// A permission a script lacks: Redis 7.0 answers "ERR The user executing the
		// script can't ...", and Redis 6 wraps the same words in its script error.
		return strings.Contains(text, "The user executing the script can't")
	}
	return false
}

// writeRefused reports whether err is the server refusing a script that writes, as it
// does out of memory (OOM), on a replica (READONLY) and for an ACL user without the
// command, rather than the script failing.
func writeRefused(err error) bool {
	code, text := replyOf(err)
	switch code {
	case "OOM", "READONLY", "NOPERM":
		return true
	case "ERR":
		return strings.Contains(text, "The user executing the script can't")
	}
	return false
}

// refusedERR are the texts of "ERR" answers that are refusals.
var refusedERR = []string{
	"unknown command",                          // EVALSHA or EVAL renamed away, or a server older than 3.2
	"Protocol error: unauthenticated",          // a long command from a connection that has not logged in
	"invalid password",                         // AUTH, Redis 5 and older
	"Client sent AUTH, but no password is set", // AUTH, Redis 5 and older
	"DB index is out of range",                 // Options.DB
	"invalid DB index",
	"SELECT is not allowed in cluster mode",
}

// replyCode splits an error answer into its code and the rest. A script's error that
// Redis 6 wraps ("ERR Error running script (...): @user_script: 1: -CODE text") is
// unwrapped first; Redis 7 answers with the inner code itself.
func replyCode(msg string) (code, text string) {
	if rest, ok := strings.CutPrefix(msg, "ERR Error running script"); ok {
		if _, inner, ok := strings.Cut(rest, ": -"); ok {
			msg = inner
		}
	}
	code, text, _ = strings.Cut(msg, " ")
	return code, text
}

// failoverAddr is the Addr of a Sentinel (failover) client's options: a placeholder.
const failoverAddr = "FailoverClient"

// fixedServer reports whether client talks to one server that only a change of its
// configuration can replace: a standalone client. A Sentinel or Cluster client finds the
// new primary, or the slot's new node, by itself.
func fixedServer(client goredis.UniversalClient) bool {
	c, ok := client.(*goredis.Client)
	return ok && c.Options().Addr != failoverAddr
}
