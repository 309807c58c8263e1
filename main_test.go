package simba_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/simba-go/simba"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// optionsFor returns opts, options of every constructor, as options of one constructor.
func optionsFor[O any](opts ...simba.Option) []O {
	out := make([]O, len(opts))
	for i, o := range opts {
		out[i] = o.(O)
	}
	return out
}
