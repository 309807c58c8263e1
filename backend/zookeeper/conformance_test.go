package zookeeper_test

import (
	"testing"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/tck"
)

// The conformance suite, each backend with a session of its own (2s), against the real
// server, at one and a half times its own durations (TTL 1.5s, call timeout 375ms): in
// CI, where every core is busy, a delete took longer than the 250ms call timeout of the
// suite's own scale, and a Release reported the store untold. A vanished backend's
// session expires after 2s, inside the suite's take-over bound.
func TestConformance(t *testing.T) {
	needServer(t)
	tck.Run(t, func(t *testing.T) simba.Backend { return newBackend(t) }, tck.WithTimeScale(conformanceScale))
}

// conformanceScale is the conformance suite's time scale here.
const conformanceScale = 1.5

// The suite again with every mutex watched per node, as a backend watches a queue longer
// than its limit, and every mutex with a go-zookeeper other than v1.0.4 or on a server
// older than 3.6.
func TestConformancePerNode(t *testing.T) {
	needServer(t)
	tck.Run(t, func(t *testing.T) simba.Backend { return newBackend(t, perNode) }, tck.WithTimeScale(conformanceScale))
}
