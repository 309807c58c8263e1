package etcd_test

import (
	"context"
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
	changed chan struct{} // closed at the next report
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
	close(c.changed)
	c.changed = make(chan struct{})
}

// await waits until the record last reported satisfies ok, and returns it.
func (c *contended) await(t *testing.T, what string, ok func(backend.Record) bool) backend.Record {
	t.Helper()
	deadline := time.After(eventBound)
	for {
		c.mu.Lock()
		rec, changed := c.last, c.changed
		c.mu.Unlock()
		if ok(rec) {
			return rec
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("%s: not reported within %v; the last record: %+v", what, eventBound, rec)
		}
	}
}

// owns waits until c reports owner as the owner.
func (c *contended) owns(t *testing.T, owner string) backend.Record {
	t.Helper()
	return c.await(t, owner+" reported the owner", func(r backend.Record) bool { return r.Owner == owner })
}
