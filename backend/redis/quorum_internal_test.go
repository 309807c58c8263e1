package redis

import (
	"testing"

	"github.com/simba-go/simba/backend"
)

// A contender whose renewal fell short of the quorum keeps its keys; when it makes a
// quorum again, the instances it kept answer its last tenure's token. The new tenure's
// token must exceed it all the same (a tenure's token is new; seen under a Yield on a
// Quorum: the same token for two tenures).
func TestQuorumNewTenureExceedsTheLast(t *testing.T) {
	qc := &quorumContention{}
	mine := func(token uint64) []reply {
		return []reply{{rec: backend.Record{Owner: "a", TTL: 1e9, Token: token}}, {rec: backend.Record{Owner: "a", TTL: 1e9, Token: token}}}
	}
	first := qc.own(t.Context(), mine(100))
	qc.owning = false // the tenure ended (renewalShort, others)
	second := qc.own(t.Context(), mine(100))
	if first.Token != 100 || second.Token <= first.Token {
		t.Fatalf("tokens %d then %d: a new tenure must have a greater one", first.Token, second.Token)
	}
}

// A Quorum's contentions hand nothing off (see Quorum): a hand-off on a Quorum finds no
// contract.
func TestQuorumHandsNothingOff(t *testing.T) {
	var c backend.Contention = &quorumContention{}
	if _, ok := c.(backend.HandOffer); ok {
		t.Error("a Quorum's contention is a HandOffer")
	}
}
