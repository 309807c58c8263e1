package main

import (
	"context"
	"fmt"
	"time"
)

// stepper is one measurement that advances one sample at a time, so that the libraries
// of a store can take turns.
type stepper interface {
	step(ctx context.Context) (time.Duration, error)
	close()
}

// turn is one stepper of an interleaved figure and what it measured.
type turn struct {
	name  string
	s     stepper
	times sample
	err   error
}

// interleave runs the steppers in turns of block samples each, after warm untimed
// samples each, until each has n timed samples. Taking turns spreads the changes of the
// machine's load over every library alike, so that their ratios hold even when the load
// moves during the run. A stepper that fails keeps its error and leaves the rotation.
func interleave(ctx context.Context, turns []*turn, warm, n, block int) {
	for _, t := range turns {
		for range warm {
			if _, err := t.s.step(ctx); err != nil {
				t.err = fmt.Errorf("warm-up: %w", err)
				break
			}
		}
	}
	for {
		busy := false
		for _, t := range turns {
			if t.err != nil || len(t.times) >= n {
				continue
			}
			busy = true
			for range min(block, n-len(t.times)) {
				d, err := t.s.step(ctx)
				if err != nil {
					t.err = err
					break
				}
				t.times = append(t.times, d)
			}
		}
		if !busy || ctx.Err() != nil {
			return
		}
	}
}
