// Command simba answers the questions of a first week in production: who owns this mutex,
// which mutexes does the store hold, when does the owner change, and, as an administrator's
// last resort, release a mutex whose owner is stuck.
//
//	simba [flags] get <mutex>       the owner record: owner, fencing token, instants
//	simba [flags] list              the mutexes the store holds records for, with owners
//	simba [flags] watch <mutex>     every change of owner, until interrupted
//	simba [flags] release <mutex>   release the mutex whoever owns it (asks first)
//
// The store is named by one URL (see package storeurl): --store, or the environment
// variable SIMBA_STORE.
//
//	redis://host:6379/0
//	redis-sentinel://sentinel:26379/0?master_name=mymaster
//	mysql://user:password@host:3306/database?table=simba_mutex
//	postgres://user:password@host:5432/database?sslmode=require&table=simba_mutex
//	zk://zk1:2181,zk2:2181,zk3:2181
//
// Flags (before or after the command):
//
//	--store URL      the store (default $SIMBA_STORE)
//	--json           print JSON (watch: one object a line) instead of a table
//	--timeout 10s    bound every store call but watch's
//	--yes            release without asking
//
// Exit status: 0 on success, 1 on failure (release refused included), 2 for bad usage.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	goredis "github.com/redis/go-redis/v9"
)

func main() {
	// go-redis logs each failed dial of its pool on its own; the command's error says once
	// that the server is unreachable, and why.
	goredis.SetLogger(quietRedis{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// quietRedis drops go-redis's own log lines.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}
