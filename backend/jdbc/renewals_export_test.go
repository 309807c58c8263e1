package jdbc

import "strconv"

// RememberClearings has the backend record n more mutex and contender pairs as cleared of
// their value rows (clearValue), as n other contenders' tenures would.
func (b *Backend) RememberClearings(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range n {
		if b.cleared == nil || len(b.cleared) >= maxCleared {
			b.cleared = make(map[string]struct{})
		}
		b.cleared["other-"+strconv.Itoa(i)+"\x00x"] = struct{}{}
	}
}

// MaxCleared is how many pairs a backend remembers having cleared.
const MaxCleared = maxCleared
