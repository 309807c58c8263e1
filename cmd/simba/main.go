// Command simba answers the questions of a first week in production: who owns this mutex,
// which mutexes does the store hold, when does the owner change, and, as an administrator's
// last resort, release a mutex whose owner is stuck.
//
//	simba [flags] get <mutex>       the owner record: owner, fencing token, instants
//	simba [flags] list [--held]     the mutexes the store holds records for, with owners
//	simba [flags] watch <mutex>     every change of owner, until interrupted
//	simba [flags] release <mutex>   release the mutex whoever owns it (asks first)
//	simba [flags] prune             SQL: delete the rows of mutexes nobody holds (asks first)
//	simba [flags] exec <mutex> -- <command> [args...]
//	                                run a command while holding the mutex
//	simba version                   the module version ("(devel)" from a checkout)
//
// With --kind semaphore or --kind rwlock, get, list, watch and release concern semaphores
// and read-write locks: their holders, each with its mode (permit, shared or exclusive),
// token and, where the store keeps them, its instants (Redis and SQL; ZooKeeper and etcd
// holds live with a session or a lease). watch reads them every second; release takes the
// holder's ID and frees that hold only, never a later one of the same holder:
//
//	simba [flags] list --kind semaphore
//	simba [flags] release --kind rwlock <name> <holder>
//
// The store is named by one URL (see package storeurl): --store, or the environment
// variable SIMBA_STORE.
//
//	redis://host:6379/0
//	redis-sentinel://sentinel:26379/0?master_name=mymaster
//	mysql://user:password@host:3306/database?table=simba_mutex
//	postgres://user:password@host:5432/database?sslmode=require&table=simba_mutex
//	zk://zk1:2181,zk2:2181,zk3:2181
//	etcd://etcd1:2379,etcd2:2379,etcd3:2379/prefix
//
// Flags (before or after the command):
//
//	--store URL        the store (default $SIMBA_STORE)
//	--json             print JSON (watch: one object a line) instead of a table
//	--timeout 10s      bound each store call but watch's (a Redis URL's client timeouts default to it)
//	--transition 6s    the owners' transition, from which a Redis owner's TTL end is derived
//	--older-than 1h    prune: rows without an owner for longer than this
//	--yes              release or prune without asking
//	--kind K           get, list, watch, release: mutex (default), semaphore or rwlock
//
// Redis keeps only when an owner's transition ends (the key's expiry): the TTL end shown
// there is that minus --transition, exact for owners configured with it, and the command
// says so on standard error.
//
// exec acquires the mutex (at once, or with --wait until it is free, for at most --timeout
// if given), runs the command in a process group of its own with SIMBA_MUTEX, SIMBA_OWNER
// and SIMBA_FENCING_TOKEN in its environment, and releases the mutex when it exits. When
// the lease is lost (the store cut off, another owner) or simba is interrupted, the group
// gets SIGTERM, and SIGKILL --grace later (default half the transition; less than it, so
// that the command is gone before another owner can acquire).
//
// Exit status: 0 on success, 1 on failure (release refused included), 2 for bad usage (a
// store URL that does not parse among it); exec: the command's status, 3 when the mutex is
// held, 4 when the lease was lost and the command stopped.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/backend/etcd/etcdurl"
	"github.com/simba-go/simba/storeurl"
)

func main() {
	// go-redis logs each failed dial of its pool on its own; the command's error says once
	// that the server is unreachable, and why.
	goredis.SetLogger(storeurl.RedisLogger{})
	if err := etcdurl.Register(); err != nil {
		fmt.Fprintf(os.Stderr, "simba: %v\n", err)
		os.Exit(exitFail)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
