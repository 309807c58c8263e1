// Package options converts options of every simba constructor (simba.Option) to the option
// type of one constructor, for tests that share one list of options among constructors.
package options

import "github.com/simba-go/simba"

// As returns opts, then extra, as options of the constructor whose option type O is
// (simba.ServiceOption, simba.LockerOption, ...).
func As[O any](opts []simba.Option, extra ...O) []O {
	out := make([]O, 0, len(opts)+len(extra))
	for _, o := range opts {
		out = append(out, o.(O)) // a simba.Option is an option of every constructor
	}
	return append(out, extra...)
}
