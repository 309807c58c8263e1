package main

import "testing"

// The reference lock renews nothing and keeps no deadline of its own: its owner has no
// notion of a lost lock to time, so the lost-lock figure leaves it out (it reported
// "never" under "the lock's TTL as the owner last set it").
func TestLostLockLeavesTheReferenceOut(t *testing.T) {
	for _, l := range libraries() {
		if isReference(l.id) && cutsOff(l) {
			t.Errorf("the lost-lock figure measures %s", l.id)
		}
	}
}
