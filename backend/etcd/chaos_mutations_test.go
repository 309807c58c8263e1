package etcd_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/simba-go/simba/internal/mutant"
)

// etcdMutation is a deliberate bug of the backend (a patch, see internal/mutant) and the
// scenario that must catch it, on the assertion that must fail.
type etcdMutation struct {
	name     string
	scenario string
	expected string // as the checker names it
	short    bool   // runs in make test too (none does: a cold build of a mutant of this module takes about 2 minutes)
}

var etcdMutations = []etcdMutation{
	// Belief ends a hundred TTLs after the proof that the lease is alive: the cut-off
	// owner believes on after its lease expired, beside its successor.
	{name: "etcd-hundredfold-belief", scenario: "40_keepalive_cut", expected: "C5"},
	// A failed keep-alive is made good by a serializable read, which the cut-off member
	// answers from its own state, where the owner's key stands.
	{name: "etcd-serializable-renewal", scenario: "43_member_partitioned", expected: "C5"},
	// A watch stream that ends (its connection cut while the deletion's revision is
	// compacted) ends none of its watches: the waiter waits for ever.
	{name: "etcd-watch-stream-end-ignored", scenario: "45_compaction_while_waiting", expected: "C6"},
	// A lease whose keep-alives go unanswered for a TTL is kept alive on: keep-alives that
	// still reach the leader keep the non-believing owner's key first in line.
	{name: "etcd-lease-kept-unanswered", scenario: "47_owner_answers_lost", expected: "C6"},
	// etcd's revision going back is only logged: the next tenures' tokens repeat earlier
	// ones.
	{name: "etcd-wiped-tokens-reused", scenario: "50_restart_wiped", expected: "C3"},
}

// testMutations builds, for each mutation, the module's tests from a copy of the
// repository with the mutation's patch applied, and runs the mutation's scenario with
// them: each run must fail, on the expected assertion. A checker that never fails proves
// nothing. With SIMBA_CHAOS=full all of them run, the short ones otherwise.
func testMutations(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range etcdMutations {
		if !m.short && os.Getenv("SIMBA_CHAOS") != "full" {
			continue
		}
		t.Run(m.name, func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), "etcd.mutated")
			if err := mutant.Build(root, t.TempDir(), m.name, "./backend/etcd", bin); err != nil {
				t.Fatal(err)
			}
			test := "TestChaos/etcd/" + m.scenario
			// The harness keeps a failed run's logs in the temporary directory: this
			// test's, removed when it ends.
			ran, caught, output := mutant.Check(bin, test, m.expected, "SIMBA_MUTATION="+m.name, "SIMBA_CHAOS=full",
				"TMPDIR="+t.TempDir())
			switch {
			case !ran:
				t.Errorf("mutation %s: %s did not run:\n%s", m.name, test, mutant.Tail(output, 30))
			case !caught:
				t.Errorf("mutation %s was not caught by %s (%s expected):\n%s", m.name, test, m.expected, mutant.Tail(output, 40))
			default:
				t.Logf("mutation %s caught: %s failed on %s", m.name, test, m.expected)
			}
		})
	}
}
