package etcd

import "slices"

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
