package simbaotel_test

import (
	"context"
	"fmt"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/memory"
	"github.com/simba-go/simba/observe/simbaotel"
)

// Example records a Locker's acquisitions with the global providers.
func Example() {
	obs, err := simbaotel.New()
	if err != nil {
		fmt.Println(err)
		return
	}
	b, _ := memory.New(memory.NewStore())
	l, _ := simba.NewLocker(b, "payments", simba.WithObserver(obs))
	defer l.Close()
	lease, err := l.Acquire(context.Background())
	fmt.Println(err)
	_ = lease.Release(context.Background())
	// Output: <nil>
}
