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
