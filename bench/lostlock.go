package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/simba-go/simba/internal/faultproxy"
)

// believer is a client whose owner has a notion of holding the lock it acquired last,
// and so can notice that it lost it.
type believer interface {
	// lostAt waits until the owner stops believing it holds the lock, or ctx ends, and
	// returns when that was.
	lostAt(ctx context.Context) (time.Time, error)
}

// ttlEnder is a client that knows the local TTL end of the lock it owns: the send time
// of its last request that found it owning, plus the ttl.
type ttlEnder interface {
	localTTLEnd() (time.Time, bool)
}

// epoch is the origin of the instants clients keep in atomics (instant, at), so that they
// keep the monotonic clock.
var epoch = time.Now()

func instant(t time.Time) int64 { return int64(t.Sub(epoch)) }

func at(n int64) time.Time { return epoch.Add(time.Duration(n)) }

// lostByDeadline waits until the instant until holds, as long as until keeps it, and
// returns it: how a peer's owner learns that its lock's TTL, as it last set it, ended.
func lostByDeadline(ctx context.Context, until func() int64) (time.Time, error) {
	for {
		u := until()
		if u == 0 {
			return time.Time{}, errors.New("no lock held")
		}
		if err := sleep(ctx, time.Until(at(u))); err != nil {
			return time.Time{}, err
		}
		if until() == u {
			return at(u), nil
		}
	}
}

// lostLockResult is the lost-lock figure of one library.
type lostLockResult struct {
	Store   string        `json:"store"`
	Library string        `json:"library"`
	ID      string        `json:"id"`
	Notion  string        `json:"notion"` // how the owner learns that it lost the lock
	Bound   time.Duration `json:"bound_ns"`
	Cuts    []lostLockCut `json:"cuts"`
}

// lostLockCut is one owner cut off.
type lostLockCut struct {
	// Noticed runs from the cut to the owner's notice: its lease context ending (simba),
	// its lock's TTL as it last set it ending (redsync, redislock); -1 for an owner with
	// no notion of it (zk.Lock).
	Noticed time.Duration `json:"noticed_ns"`
	// Succeeded runs from the cut to the successor's acquire returning.
	Succeeded time.Duration `json:"succeeded_ns"`
	// PastTTLEnd is how long after its local TTL end the owner noticed (negative: before),
	// for simba on a lease store; HasTTLEnd says whether it was measured.
	PastTTLEnd time.Duration `json:"past_ttl_end_ns"`
	HasTTLEnd  bool          `json:"has_ttl_end"`
}

func (r lostLockResult) noticed() sample {
	var s sample
	for _, c := range r.Cuts {
		if c.Noticed >= 0 {
			s = append(s, c.Noticed)
		}
	}
	return s
}

func (r lostLockResult) succeeded() sample {
	var s sample
	for _, c := range r.Cuts {
		s = append(s, c.Succeeded)
	}
	return s
}

// margins returns, per cut where the owner noticed, how long before the successor's
// acquisition it did: positive when the owner had stopped believing first.
func (r lostLockResult) margins() sample {
	var s sample
	for _, c := range r.Cuts {
		if c.Noticed >= 0 {
			s = append(s, c.Succeeded-c.Noticed)
		}
	}
	return s
}

// cutsOff reports whether the lost-lock figure measures lib: every library whose lock
// outlives a cut-off owner's connection. The server-session locks (GET_LOCK,
// pg_advisory_lock: bound 0) stay held while the cut-off connection stays open, so no
// successor takes over; memory has no connection to cut. The reference lock renews
// nothing and keeps no deadline: its owner has no notion to time.
func cutsOff(lib library) bool {
	return lib.store != storeMemory && lib.bound != 0 && !isReference(lib.id)
}

// notionOf describes how an owner of lib learns that it lost the lock, and the most that
// may take after its connection is cut, by design.
func notionOf(lib library) (string, time.Duration) {
	switch {
	case lib.simba && lib.store == storeZooKeeper:
		// go-zookeeper reports the connection lost after its receive timeout, two
		// thirds of the session timeout, without a packet; simba's owner stops then.
		return "lease context (ends when the connection is reported lost)", zkSession * 2 / 3
	case lib.simba && lib.store == storeEtcd:
		// Belief lasts a lease TTL from the last answered keep-alive's send time.
		return "lease context (ends a lease TTL after the last answered keep-alive at the latest)", failoverLease
	case lib.simba:
		return "lease context (ends at the local TTL end at the latest)", failoverTTL
	case lib.store == storeEtcd:
		// The client closes a keep-alive unanswered for the lease's TTL from its last
		// answer, which it checks every second, and the session's Done channel with it.
		return "the session's Done channel (closed once the lease went a TTL without an answered keep-alive)", failoverLease + time.Second
	case lib.store == storeRedis:
		return "the lock's TTL as the owner last set it", failoverLease
	}
	return "none", 0
}

// lostLocks measures the lost-lock figure of the libraries on stores that it applies to.
func (m *measurer) lostLocks(ctx context.Context, e *env, res *results, libs []library, stores []string, s runSettings) {
	for _, l := range libs {
		if !cutsOff(l) || !slices.Contains(stores, l.store) {
			continue
		}
		m.do(figLostLock, l.id, func() error {
			r, err := measureLostLock(ctx, e, l, s.Cuts)
			if len(r.Cuts) > 0 {
				res.LostLock = append(res.LostLock, r)
				noticed := "never"
				if n := r.noticed(); len(n) > 0 {
					noticed = ms(n.quantile(0.5)) + " (max " + ms(n.max()) + ")"
				}
				logf("  %-16s noticed after %s, successor after %s", l.id, noticed, ms(r.succeeded().quantile(0.5)))
			}
			return err
		})
	}
}

// measureLostLock cuts off an owner n times and times how long it takes to notice, and
// how long the successor takes to acquire.
func measureLostLock(ctx context.Context, e *env, lib library, n int) (lostLockResult, error) {
	notion, bound := notionOf(lib)
	res := lostLockResult{Store: lib.store, Library: lib.name, ID: lib.id, Notion: notion, Bound: bound}
	for range n {
		c, err := cutOff(ctx, e, lib)
		if err != nil {
			return res, err
		}
		res.Cuts = append(res.Cuts, c)
	}
	return res, nil
}

// cutOff makes one owner, reaching the store through a proxy of its own, and one
// waiter, connected directly; the waiter waits (verified as in the hand-over figure), the
// owner holds for a random time below failoverLease (a random moment of its renewal
// cycle), and then the proxy swallows every byte both ways while keeping the connections
// open: the owner is cut off, as by a partition, and cannot tell. Both times run from the
// cut, since a lease that is safe ends the owner's belief before a successor may
// acquire: counted from the successor's acquisition, the notice is negative by design.
func cutOff(ctx context.Context, e *env, lib library) (lostLockCut, error) {
	var cut lostLockCut
	proxy, ep, err := proxied(e.endpoints, lib.store)
	if err != nil {
		return cut, err
	}
	defer proxy.Close()
	mutex := e.mutex("l", lib.id)
	owner, err := lib.open(ctx, e.via(ep), mutex, openOptions{failover: true})
	if err != nil {
		return cut, fmt.Errorf("owner: %w", err)
	}
	defer owner.close()
	actx, acancel := context.WithTimeout(ctx, 30*time.Second)
	release, err := owner.acquire(actx)
	acancel()
	if err != nil {
		return cut, fmt.Errorf("owner: %w", err)
	}
	// The owner's connections are gone when this runs (the proxy is closed first), so
	// the release fails, at once on most stores; etcd's client waits for a connection
	// until the context ends, so the release has a deadline.
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), failoverLease)
		defer cancel()
		_ = release(rctx)
	}()
	kctx, stopKeeping := context.WithCancel(ctx)
	defer stopKeeping()
	if k, ok := owner.(keeper); ok {
		go k.keep(kctx)
	}

	w, err := lib.open(ctx, e, mutex, openOptions{failover: true})
	if err != nil {
		return cut, fmt.Errorf("waiter: %w", err)
	}
	defer w.close()
	if err := w.armWait(ctx); err != nil {
		return cut, err
	}
	wctx, cancel := context.WithTimeout(ctx, lib.bound+time.Minute)
	defer cancel()
	got := make(chan acquired, 1)
	go func() {
		r, err := w.acquire(wctx)
		got <- acquired{r, time.Now(), err}
	}()
	// closeProxy ends the owner's connections, so that a waiter that takes no context
	// (zk.Lock) gets the lock once the owner's session expires, and the owner's clean-up
	// fails fast.
	closeProxy := func() { _ = proxy.Close() }
	if err := waitFor(ctx, 10*time.Second, time.Millisecond, "waiter waiting", w.waiting); err != nil {
		closeProxy()
		return cut, err
	}
	if err := sleep(ctx, rand.N(failoverLease)); err != nil {
		closeProxy()
		return cut, err
	}
	select {
	case a := <-got:
		closeProxy()
		if a.err == nil {
			_ = a.release(context.WithoutCancel(ctx))
		}
		return cut, errors.New("the waiter acquired while the owner was connected")
	default:
	}

	type notice struct {
		at  time.Time
		err error
	}
	noticed := make(chan notice, 1)
	b, knows := owner.(believer)
	nctx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	if knows {
		go func() {
			t, err := b.lostAt(nctx)
			noticed <- notice{t, err}
		}()
	}
	began := time.Now()
	proxy.Blackhole(faultproxy.Both)
	a := <-got
	if a.err != nil {
		closeProxy()
		return cut, fmt.Errorf("successor: %w", a.err)
	}
	cut.Succeeded = a.at.Sub(began)
	defer func() { _ = a.release(context.WithoutCancel(ctx)) }()
	cut.Noticed = -1
	if knows {
		select {
		case n := <-noticed:
			if n.err != nil {
				closeProxy()
				return cut, fmt.Errorf("owner's notice: %w", n.err)
			}
			cut.Noticed = n.at.Sub(began)
			if te, ok := owner.(ttlEnder); ok {
				if end, ok := te.localTTLEnd(); ok {
					cut.PastTTLEnd, cut.HasTTLEnd = n.at.Sub(end), true
				}
			}
		case <-time.After(time.Minute):
			closeProxy()
			return cut, errors.New("the owner did not notice within a minute of the successor's acquisition")
		}
	}
	closeProxy()
	return cut, nil
}

// writeLostLock writes the lost-lock figure.
func (r *results) writeLostLock(b *bytes.Buffer) {
	fmt.Fprintf(b, "An owner, reaching the store through a proxy of its own, holds the mutex (renewing where the library does not on its own, every third of its lease); a waiter, connected directly, waits, verified as in the hand-over figure. After a random time below the lease (%v: simba ttl %v + transition %v, the peers' lock TTL, ZooKeeper's session timeout), so at a random moment of the owner's renewal cycle, the proxy swallows every byte both ways and keeps the connections open: the owner is cut off as by a partition and sees only silence. Both times run from the cut: to the owner's notice (simba: its lease context ends; redsync: its Until(), which it sets at every lock and extension, passes; redislock, which keeps no local deadline: the send time of its last successful Obtain or Refresh plus the TTL, what an owner that tracks it would know; concurrency.Mutex: its session's Done channel closes; zk.Lock gives its owner no signal), and to the successor's acquire returning. They run from the cut and not from the successor's acquisition because a safe lease ends the owner's belief before a successor may acquire: counted from the acquisition, the notice is negative by design; the margin column is that difference, positive when the owner had stopped first. The bound is the most a notice may take by design: simba on a lease store, its local TTL end (its last renewal before the cut was sent less than ttl before it); simba on ZooKeeper, go-zookeeper's receive timeout (two thirds of the session timeout) after which it reports the connection lost; simba on etcd, the lease TTL (its last answered keep-alive before the cut was sent less than the TTL before it); concurrency.Mutex, the lease TTL and the second between its client's checks of a keep-alive's answer; redsync and redislock, their TTL. \"Past the TTL end\" is, for simba on a lease store, the notice less its local TTL end (the last renewal that found it owning was sent, plus ttl): at most zero, by the margin simba keeps for clock-rate drift. GET_LOCK and pg_advisory_lock are not in it: the server keeps their lock with the owner's session, which stays open while its connection is cut, so no successor acquires (until the server drops the session: hours by default); nor is the reference lock, whose owner renews nothing and keeps no deadline. %d cuts per library.\n\n",
		failoverLease, failoverTTL, failoverTransition, r.Settings.Cuts)
	b.WriteString("| store | library | owner's notion | cuts | noticed after the cut: median / max | bound | successor acquired after the cut: median / max | owner stopped before the successor, min | past the TTL end, max |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, l := range r.LostLock {
		noticed, bound, margin, past := "never", "–", "–", "–"
		if n := l.noticed(); len(n) > 0 {
			noticed = ms(n.quantile(0.5)) + " / " + ms(n.max())
			margin = signedMs(l.margins().min())
		}
		if l.Bound > 0 {
			bound = ms(l.Bound)
		}
		var pastTTL sample
		for _, c := range l.Cuts {
			if c.HasTTLEnd {
				pastTTL = append(pastTTL, c.PastTTLEnd)
			}
		}
		if len(pastTTL) > 0 {
			past = signedMs(pastTTL.max())
		}
		s := l.succeeded()
		fmt.Fprintf(b, "| %s | %s | %s | %d | %s | %s | %s / %s | %s | %s |\n", storeTitle(l.Store), bold(l.Library, l.ID), l.Notion, len(l.Cuts), noticed, bound, ms(s.quantile(0.5)), ms(s.max()), margin, past)
	}
}

// signedMs formats a duration that may be negative.
func signedMs(d time.Duration) string {
	if d < 0 {
		return "−" + ms(-d)
	}
	return ms(d)
}
