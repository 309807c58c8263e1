package main

import "testing"

// The best peer of a goal is a library users would pick instead of simba: the reference
// lock, which only measures a floor, is not one, however fast it is.
func TestBestPeerLeavesTheReferenceOut(t *testing.T) {
	r := &results{Contended: []contendedResult{
		{Store: storeRedis, ID: "simba-redis", Library: "simba", PerSecond: 2000},
		{Store: storeRedis, ID: "redislock-tuned", Library: "redislock (tuned)", PerSecond: 3000},
		{Store: storeRedis, ID: "reference-redis", Library: "reference (not a product)", PerSecond: 4000},
	}}
	if id, _, ok := r.bestPeer(storeRedis); !ok || id != "redislock-tuned" {
		t.Fatalf("best peer %q (%v), want redislock-tuned", id, ok)
	}
}
