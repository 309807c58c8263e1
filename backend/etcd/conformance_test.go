package etcd_test

import (
	"testing"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/tck"
)

// testScale stretches the conformance suite's durations (TTL 2s, transition 1s, a vanished
// owner's loss within 4s) around etcd's shortest lease: a vanished backend's lease
// (testLeaseTTL) expires on the server, and its owner stops believing, within 2s, plus the
// server's expiry check (every 500ms).
const testScale = 2

// The conformance suite against a single member, each backend on a client and lease of
// its own.
func TestConformance(t *testing.T) {
	needServer(t)
	tck.Run(t, func(t *testing.T) simba.Backend { return newBackend(t) }, tck.WithTimeScale(testScale))
}

// The conformance suite against a 3-member cluster, each backend's client knowing every
// member. A write there waits for two members, each on a share of this host's two cores:
// the suite runs at a larger scale (TTL 3s, a call timeout of 750ms).
func TestConformanceCluster(t *testing.T) {
	c := cluster(t)
	tck.Run(t, func(t *testing.T) simba.Backend { return newBackendAt(t, c.Endpoints()) }, tck.WithTimeScale(testScale+1))
}
