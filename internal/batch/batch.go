// Package batch holds what the backends that gather many contentions' calls into one
// request share.
package batch

import "context"

// ByDeadline orders calls by their contexts' deadlines, soonest first, a call without a
// deadline last: a comparison function for slices.SortStableFunc.
func ByDeadline(a, b context.Context) int {
	da, aok := a.Deadline()
	db, bok := b.Deadline()
	switch {
	case aok && bok:
		return da.Compare(db)
	case aok:
		return -1
	case bok:
		return 1
	}
	return 0
}
