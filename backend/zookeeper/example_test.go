package zookeeper_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/zookeeper"
)

// A Locker on ZooKeeper. The backend makes its own connection through the function it is
// given, which must pass the backend's event callback to zk.Connect; Close closes it.
func Example() {
	b, err := zookeeper.New(func(events zk.EventCallback) (*zk.Conn, <-chan zk.Event, error) {
		return zk.Connect([]string{"127.0.0.1:2181"}, 10*time.Second, zk.WithEventCallback(events),
			zk.WithDialer(zookeeper.Dialer(5*time.Second))) // see Dialer
	})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

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
	// lease.Context() ends as soon as the session is lost; pass lease.Token() (the owner
	// node's czxid) to whatever the lock protects.
	fmt.Println("token", lease.Token(), "session timeout", b.SessionTimeout())
}

// Application code that wants the connection's events too wraps the callback.
func ExampleConnect() {
	mine := func(ev zk.Event) { log.Printf("zookeeper: %v %v", ev.Type, ev.State) }
	b, err := zookeeper.New(func(events zk.EventCallback) (*zk.Conn, <-chan zk.Event, error) {
		return zk.Connect([]string{"zk1:2181", "zk2:2181", "zk3:2181"}, 10*time.Second,
			zk.WithEventCallback(func(ev zk.Event) { events(ev); mine(ev) }))
	}, zookeeper.WithACL(zk.WorldACL(zk.PermAll)))
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
}
