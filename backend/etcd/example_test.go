package etcd_test

import (
	"context"
	"fmt"
	"log"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/etcd"
)

// A Locker on etcd, whose token guards a write to a resource kept in the same etcd: the
// write is made only while the tenure holds the mutex on the store.
func Example() {
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"etcd1:2379", "etcd2:2379", "etcd3:2379"},
		DialTimeout: 5 * time.Second,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close() // after the backend's Close: the backend never closes the client
	b, err := etcd.New(client, etcd.WithLeaseTTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close() // revokes the lease: the next owner takes over at once

	locker, err := simba.NewLocker(b, "nightly-report")
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lease, err := locker.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(context.Background())
	// lease.Context() ends as soon as the lease is lost, or at the latest a TTL after the
	// last keep-alive the leader answered.
	guard, err := b.Fence(lease.Context(), "nightly-report", lease.Token())
	if err != nil {
		log.Fatal(err)
	}
	resp, err := client.Txn(lease.Context()).If(guard).Then(clientv3.OpPut("reports/last", "2026-11-27")).Commit()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("written:", resp.Succeeded) // false: the tenure was over on the store
}
