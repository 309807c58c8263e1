package redis_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/internal/options"
)

// Timing of the tests that drive contentions and services themselves.
const (
	testTTL        = time.Second
	testTransition = 500 * time.Millisecond
	eventDeadline  = 10 * time.Second // how long a test waits for an event before failing
)

// signal wakes every waiter at each change; like a condition variable with deadlines.
type signal struct {
	mu sync.Mutex
	ch chan struct{}
}

func (s *signal) notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}

func (s *signal) next() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// await waits until cond holds, re-checking at every notify of sig, or fails t after the
// event deadline.
func await(t testing.TB, sig *signal, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(eventDeadline)
	defer deadline.Stop()
	for {
		ch := sig.next()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			if cond() {
				return
			}
			t.Fatalf("timed out after %v waiting for %s", eventDeadline, what)
		}
	}
}

// poll waits until cond holds, checking it every few milliseconds: for conditions on the
// server, which sends no events.
func poll(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(eventDeadline)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", eventDeadline, what)
		}
		<-tick.C
	}
}

// wakes counts a participant's wake-ups.
type wakes struct {
	mu  sync.Mutex
	n   int
	sig signal
}

func (w *wakes) wake() {
	w.mu.Lock()
	w.n++
	w.mu.Unlock()
	w.sig.notify()
}

func (w *wakes) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// waitMore waits until there were more than n wake-ups.
func (w *wakes) waitMore(t testing.TB, n int, what string) {
	t.Helper()
	await(t, &w.sig, what, func() bool { return w.count() > n })
}

// contend opens a lease contention on b directly, as the service would, and stops it when
// t ends. w receives its wake-ups.
func contend(t testing.TB, b simba.Backend, mutex, id string, w *wakes) backend.LeaseContention {
	t.Helper()
	p := backend.Participant{
		Mutex: mutex, ContenderID: id, TTL: testTTL, Transition: testTransition,
		Logger: slog.New(slog.DiscardHandler), Wake: w.wake, Report: func(backend.Record, time.Time) {},
	}
	c, err := b.StartContend(t.Context(), p)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.StopContend(context.Background()) })
	lc, ok := c.(backend.LeaseContention)
	require.True(t, ok, "the Redis backend's contentions are lease contentions")
	return lc
}

// numSub returns how many clients are subscribed to channel.
func numSub(t testing.TB, admin goredis.UniversalClient, channel string) int64 {
	t.Helper()
	m, err := admin.PubSubNumSub(t.Context(), channel).Result()
	require.NoError(t, err)
	return m[channel]
}

// clientsNamed returns, for the connections whose client name is name, how many there
// are and how many of them are subscribed to at least one channel.
func clientsNamed(t testing.TB, admin goredis.UniversalClient, name string) (conns, subscribed int) {
	t.Helper()
	list, err := admin.ClientList(t.Context()).Result()
	require.NoError(t, err)
	sc := bufio.NewScanner(strings.NewReader(list))
	for sc.Scan() {
		fields := map[string]string{}
		for _, f := range strings.Fields(sc.Text()) {
			k, v, _ := strings.Cut(f, "=")
			fields[k] = v
		}
		if fields["name"] != name {
			continue
		}
		conns++
		if n, _ := strconv.Atoi(fields["sub"]); n > 0 {
			subscribed++
		}
	}
	return conns, subscribed
}

// namedClient returns a client whose connections carry a client name of their own, so
// that CLIENT LIST tells them apart.
func namedClient(t testing.TB, addr string) (*goredis.Client, string) {
	name := fmt.Sprintf("simba-test-%d", names.Add(1))
	opt := clientOptions(addr)
	opt.ClientName = name
	c := goredis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c, name
}

// recorder follows the beliefs of several contenders of one mutex through their
// callbacks: who believes now, the longest time two believed at once, and the tokens.
type recorder struct {
	mu         sync.Mutex
	believers  map[string]time.Time
	overlapAt  time.Time // when a second believer appeared; zero while at most one believes
	maxOverlap time.Duration
	acquired   map[string]int
	released   map[string]int
	tokens     []uint64 // in OnAcquired order
	owners     []string
	sig        signal
}

func newRecorder() *recorder {
	return &recorder{believers: map[string]time.Time{}, acquired: map[string]int{}, released: map[string]int{}}
}

// contender returns callbacks for contender id of mutex that record into r.
func (r *recorder) contender(mutex, id string) simba.ContenderFuncs {
	return simba.ContenderFuncs{
		MutexName: mutex,
		ID:        id,
		Acquired: func(_ context.Context, s simba.State) {
			r.mu.Lock()
			now := time.Now()
			r.believers[id] = now
			if len(r.believers) == 2 {
				r.overlapAt = now
			}
			r.acquired[id]++
			r.tokens = append(r.tokens, s.After.Token)
			r.owners = append(r.owners, id)
			r.mu.Unlock()
			r.sig.notify()
		},
		Released: func(simba.State) {
			r.mu.Lock()
			delete(r.believers, id)
			if len(r.believers) == 1 && !r.overlapAt.IsZero() {
				r.maxOverlap = max(r.maxOverlap, time.Since(r.overlapAt))
				r.overlapAt = time.Time{}
			}
			r.released[id]++
			r.mu.Unlock()
			r.sig.notify()
		},
	}
}

// holder returns the only believer, or "" when none or several believe.
func (r *recorder) holder() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.believers) != 1 {
		return ""
	}
	for id := range r.believers {
		return id
	}
	return ""
}

func (r *recorder) acquisitions(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.acquired[id]
}

func (r *recorder) releases(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.released[id]
}

// tokenCheck returns an error unless tokens strictly increase from one tenure to the
// next (a contender that acquires again with the same token renewed the same tenure).
func (r *recorder) tokenCheck() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := 1; i < len(r.tokens); i++ {
		same := r.owners[i] == r.owners[i-1] && r.tokens[i] == r.tokens[i-1]
		if r.tokens[i] <= r.tokens[i-1] && !same {
			return fmt.Errorf("token went backwards: %s got %d after %s had %d", r.owners[i], r.tokens[i], r.owners[i-1], r.tokens[i-1])
		}
	}
	return nil
}

// overlap returns the longest time two contenders believed at once, counting one that
// is still under way.
func (r *recorder) overlap() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.overlapAt.IsZero() {
		return max(r.maxOverlap, time.Since(r.overlapAt))
	}
	return r.maxOverlap
}

// service returns a started contender service of mutex on b that records into r, stopped
// when t ends.
func (r *recorder) service(t testing.TB, b simba.Backend, mutex, id string, opts ...simba.Option) *simba.Service {
	t.Helper()
	opts = append([]simba.Option{simba.WithTTL(testTTL), simba.WithTransition(testTransition)}, opts...)
	s, err := simba.NewService(b, r.contender(mutex, id), options.As[simba.ServiceOption](opts)...)
	require.NoError(t, err)
	require.NoError(t, s.Start(t.Context()))
	t.Cleanup(func() { _ = s.Close() })
	return s
}
