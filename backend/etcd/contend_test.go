package etcd_test

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba/backend"
)

// contended is a contention started on a backend directly, as simba drives it, with the
// records it reports.
type contended struct {
	backend.Contention
	mu      sync.Mutex
	last    backend.Record
	reports []backend.Record // every record reported, from the first that await has not passed
	changed chan struct{}    // closed at the next report
}

// startContention starts id's contention for mutex on b, with owner value value (none: ""); a
// retriever's when id is empty. It is stopped when the test ends.
func startContention(t *testing.T, b *testBackend, mutex, id, value string) *contended {
	t.Helper()
	c := &contended{changed: make(chan struct{})}
	ctx, cancel := context.WithTimeout(t.Context(), eventBound)
	defer cancel()
	var err error
	c.Contention, err = b.StartContend(ctx, backend.Participant{
		Mutex: mutex, ContenderID: id, Value: value, TTL: testLeaseTTL, Transition: testLeaseTTL / 2,
		Wake: func() {}, Report: c.report,
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), eventBound)
		defer cancel()
		_ = c.StopContend(ctx)
	})
	return c
}

func (c *contended) report(rec backend.Record, _ time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last = rec
	c.reports = append(c.reports, rec)
	close(c.changed)
	c.changed = make(chan struct{})
}

// await waits until a record that satisfies ok is reported, if none was since the one
// the last await returned, and returns it. It sees every record, even one reported just
// before another.
func (c *contended) await(t *testing.T, what string, ok func(backend.Record) bool) backend.Record {
	t.Helper()
	deadline := time.After(eventBound)
	for {
		c.mu.Lock()
		reports, last, changed := c.reports, c.last, c.changed
		for i, rec := range reports {
			if ok(rec) {
				c.reports = reports[i+1:]
				c.mu.Unlock()
				return rec
			}
		}
		c.reports = nil
		c.mu.Unlock()
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("%s: not reported within %v; the last record: %+v", what, eventBound, last)
		}
	}
}

// as returns c's contention as a T, an optional contract, failing the test when it is none.
func as[T any](t *testing.T, c *contended) T {
	t.Helper()
	v, ok := c.Contention.(T)
	require.True(t, ok, "the contention is a %v", reflect.TypeFor[T]())
	return v
}

// owns waits until c reports owner as the owner (see await).
func (c *contended) owns(t *testing.T, owner string) backend.Record {
	t.Helper()
	return c.await(t, owner+" reported the owner", func(r backend.Record) bool { return r.Owner == owner })
}
