package jdbc

import "sync"

// maxIdleFloors bounds how many mutexes without a running contention a backend remembers
// the highest version of.
const maxIdleFloors = 4096

// floors remembers, for each mutex, the highest version the backend has seen in its row:
// the floor below which it never creates the row again nor hands out a token, and against
// which it notices versions that went back; and whether the mutex's last turn here was
// contended (see prepareLock). It keeps the mutexes its contentions contend for, and up to
// maxIdleFloors others. Safe for concurrent use.
type floors struct {
	mu sync.Mutex
	m  map[string]*floor
}

type floor struct {
	max   uint64 // the highest version seen
	low   uint64 // the version a regression was last reported at, while below max; else 0
	users int    // running contentions of the mutex

	contended bool // a contention's last turn came through a wait for the named lock, or found another holding it
}

// join and leave count the running contentions of mutex.
func (f *floors) join(mutex string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = make(map[string]*floor)
	}
	e := f.m[mutex]
	if e == nil {
		e = &floor{}
		f.m[mutex] = e
	}
	e.users++
}

func (f *floors) leave(mutex string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e := f.m[mutex]; e != nil {
		e.users--
	}
	if len(f.m) <= maxIdleFloors {
		return
	}
	idle := 0
	for _, e := range f.m {
		if e.users == 0 {
			idle++
		}
	}
	for name, e := range f.m { // arbitrary ones among the idle
		if idle <= maxIdleFloors {
			return
		}
		if e.users == 0 {
			delete(f.m, name)
			idle--
		}
	}
}

// get returns the highest version seen for mutex, 0 if none.
func (f *floors) get(mutex string) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e := f.m[mutex]; e != nil {
		return e.max
	}
	return 0
}

// saw records version v, read by a statement sent when get returned before. It reports a
// regression when v is lower than before, once per step down: versions then climbing back
// below the floor are not reported again. prev is the floor.
func (f *floors) saw(mutex string, before, v uint64) (prev uint64, back bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.m[mutex]
	if e == nil {
		return 0, false // forgotten meanwhile
	}
	if v < before && (e.low == 0 || v < e.low) {
		e.low, back = v, true
	}
	if v >= e.max {
		e.max, e.low = v, 0
	}
	return e.max, back
}

// setContended records whether a contention of mutex found its turn contended: it waited
// for the named lock, or found another session holding it (true), or took the lock at
// once (false).
func (f *floors) setContended(mutex string, contended bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e := f.m[mutex]; e != nil {
		e.contended = contended
	}
}

// contended reports what setContended last recorded for mutex.
func (f *floors) contended(mutex string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.m[mutex]
	return e != nil && e.contended
}
