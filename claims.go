package simba

import (
	"fmt"
	"sync"
)

// claims holds the (mutex, contender ID) pairs of the running services of this process, so
// that one contender cannot contend twice for one mutex (the store could not tell the two
// apart).
var claims = struct {
	sync.Mutex
	m map[string]struct{}
}{m: map[string]struct{}{}}

// claimKey is the key of the pair (mutex, id) in claims.
func claimKey(mutex, id string) string { return mutex + "\x00" + id }

// claim records that contender id contends for mutex under key (claimKey), or fails if it
// does already.
func claim(key, mutex, id string) error {
	claims.Lock()
	defer claims.Unlock()
	if _, ok := claims.m[key]; ok {
		return invalid("contender ID", id, fmt.Sprintf("already contends for mutex %q in this process", mutex))
	}
	claims.m[key] = struct{}{}
	return nil
}

// unclaim undoes claim of key once the contention's store work is finished.
func unclaim(key string) {
	claims.Lock()
	defer claims.Unlock()
	delete(claims.m, key)
}
