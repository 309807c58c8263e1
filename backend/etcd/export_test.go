package etcd

import (
	"slices"
	"time"
)

// Test hooks.

// Watched returns, by contender ID, the keys that b's contentions on mutex watch, sorted.
func Watched(b *Backend, mutex string) map[string][]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string][]string)
	for c := range b.contentions {
		if c.p.Mutex != mutex {
			continue
		}
		var keys []string
		for t := range c.watches {
			keys = append(keys, t.key)
		}
		slices.Sort(keys)
		out[c.p.ContenderID] = keys
	}
	return out
}

// KeyOf exposes the key format to the external tests.
var KeyOf = keyOf

// WatchAgainFrom makes b's contentions on mutex watch what they watch anew, from revision
// rev on (a revision compacted already, say), as a watch sent late would.
func WatchAgainFrom(b *Backend, mutex string, rev int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for c := range b.contentions {
		if c.p.Mutex != mutex {
			continue
		}
		var lk look
		for t, w := range c.watches {
			b.unwatch(w)
			delete(c.watches, t)
			lk.watch = append(lk.watch, t)
		}
		lk.rev = rev - 1
		c.setWatches(lk)
	}
}

// SetOwnWatchDelay sets how long b's owners' watches of their own keys wait before their
// creates are sent (ownWatchDelay by default).
func SetOwnWatchDelay(b *Backend, d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.watches.ownDelay = d
}

// WatchesHeldBack returns how many of b's watches wait for their creates to be sent.
func WatchesHeldBack(b *Backend) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, w := range b.watches.creates {
		if b.watches.byID[w.id] == w {
			n++
		}
	}
	return n
}

// SendWatchesNow makes b send the creates of the watches it holds back at once.
func SendWatchesNow(b *Backend) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, w := range b.watches.creates {
		w.due = time.Time{}
	}
	b.wakeSender()
}
