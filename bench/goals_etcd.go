package main

import "fmt"

// etcdGoals are issue 36's etcd goals: simba's Locker on backend/etcd against etcd's own
// concurrency.Mutex on the same member, on every figure.
func (r *results) etcdGoals() []goal {
	return []goal{
		r.ratioGoal("#36", "etcd uncontended cycle p50 ≤ 1.0 × concurrency.Mutex's", "cycle", "simba-etcd", "etcd-mutex", "concurrency.Mutex", 1.0),
		r.ratioGoal("#36", "etcd hand-over p50 ≤ 1.5 × concurrency.Mutex's", "handover", "simba-etcd", "etcd-mutex", "concurrency.Mutex", 1.5),
		r.throughputGoal("#36", fmt.Sprintf("etcd, %d clients: throughput ≥ 1.0 × concurrency.Mutex's", r.Settings.Clients), "simba-etcd", "etcd-mutex", "concurrency.Mutex", 1.0, 0, 0),
		r.failoverGoal("#36", "etcd crash failover p50 ≤ 1.0 × concurrency.Mutex's", "simba-etcd", "etcd-mutex", "concurrency.Mutex", 1.0),
	}
}

// failoverGoal is met when the p50 takeover of simba's library mine is at most limit ×
// the peer's.
func (r *results) failoverGoal(issue, text, mine, peer, peerName string, limit float64) goal {
	var s, p *failoverResult
	for i := range r.Failover {
		switch r.Failover[i].ID {
		case mine:
			s = &r.Failover[i]
		case peer:
			p = &r.Failover[i]
		}
	}
	if s == nil || p == nil || len(s.Takeovers) == 0 || len(p.Takeovers) == 0 || p.Takeovers.quantile(0.5) <= 0 {
		return missing(issue, text)
	}
	sp, pp := s.Takeovers.quantile(0.5), p.Takeovers.quantile(0.5)
	ratio := float64(sp) / float64(pp)
	return goal{issue, text, fmt.Sprintf("simba %s, %s %s: %.2f ×", ms(sp), peerName, ms(pp), ratio), verdict(ratio <= limit)}
}
