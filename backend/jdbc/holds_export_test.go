package jdbc

// Parked returns how many of the backend's contentions for name wait in a parked
// statement after checking the name's rows, so that tests and benchmarks release only
// once a waiter of another process can be woken by it.
func (b *Backend) Parked(name string) int {
	b.mu.Lock()
	var holds []*holdContention
	for c := range b.holds {
		holds = append(holds, c)
	}
	b.mu.Unlock() // a parking's lock is taken before the backend's, never after (holdPark)
	n := 0
	for _, c := range holds {
		c.parking.mu.Lock()
		if c.name == name && c.parking.parked {
			n++
		}
		c.parking.mu.Unlock()
	}
	return n
}

// ParkSeen bounds a parking's look for its statement among the server's running ones.
const ParkSeen = parkSeen

// Spares returns how many parking connections the backend keeps for its next parking.
func (b *Backend) Spares() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.spare != nil {
		return 1
	}
	return 0
}
