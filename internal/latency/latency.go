// Package latency reports latency samples from Go benchmarks.
package latency

import (
	"slices"
	"testing"
	"time"
)

// Report adds the p50 and p99 of d (sorted in place) to b's results as p50-ns and p99-ns.
// It reports nothing for no samples.
func Report(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(d[len(d)*99/100].Nanoseconds()), "p99-ns")
}
