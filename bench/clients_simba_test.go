package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba/backend/memory"
)

// syncBuffer is a bytes.Buffer safe for the loggers of several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestClosedSimbaClientToldTheStore: a simba client closed right after its wait was
// cancelled while the holder released, as the contended figure stops its clients, lets its
// Locker finish with the store (a grant that came with the cancellation is released)
// before the backend closes, so that the run's log shows no "the store was not told".
func TestClosedSimbaClientToldTheStore(t *testing.T) {
	var logged syncBuffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn})))
	t.Cleanup(func() { slog.SetDefault(prev) })

	ctx := context.Background()
	e := &env{memory: memory.NewStore(), run: "test", names: new(atomic.Int64)}
	lib, err := libraryByID("simba-memory")
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		closeRacingGrant(ctx, t, e, lib)
		if s := logged.String(); s != "" {
			t.Fatalf("closing the clients logged:\n%s", s)
		}
	}
}

// closeRacingGrant makes a waiter wait, cancels it as the holder releases, and closes
// both clients.
func closeRacingGrant(ctx context.Context, t *testing.T, e *env, lib library) {
	t.Helper()
	mutex := e.mutex("close", lib.id)
	holder, err := lib.open(ctx, e, mutex, openOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.close()
	release, err := holder.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waiter, err := lib.open(ctx, e, mutex, openOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := waiter.armWait(ctx); err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithCancel(ctx)
	type acquired struct {
		release func(context.Context) error
		err     error
	}
	done := make(chan acquired, 1)
	go func() {
		r, err := waiter.acquire(wait)
		done <- acquired{r, err}
	}()
	for deadline := time.Now().Add(30 * time.Second); ; {
		on, err := waiter.waiting(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if on {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the waiter was not seen waiting within 30s")
		}
		time.Sleep(time.Millisecond)
	}
	go cancel()
	if err := release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-done:
		if a.err == nil {
			if err := a.release(ctx); err != nil {
				t.Fatal(err)
			}
		} else if !errors.Is(a.err, context.Canceled) {
			t.Fatalf("the cancelled wait returned %v", a.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the cancelled wait did not return within 30s")
	}
	if err := waiter.close(); err != nil {
		t.Errorf("close the waiter: %v", err)
	}
}
