package simba

import "fmt"

// State is a change of owner, Before and After, as a service delivers it; renewals are
// not delivered.
type State struct {
	Before Owner
	After  Owner
}

// Changed reports whether the owner ID differs between Before and After.
func (s State) Changed() bool { return s.Before.ID != s.After.ID }

// Acquired reports whether the change made contenderID the owner.
func (s State) Acquired(contenderID string) bool {
	return s.Changed() && s.After.OwnedBy(contenderID)
}

// Released reports whether the change ended contenderID's ownership.
func (s State) Released(contenderID string) bool {
	return s.Changed() && s.Before.OwnedBy(contenderID)
}

// String formats the change for logs.
func (s State) String() string {
	return fmt.Sprintf("%s -> %s", ownerLabel(s.Before), ownerLabel(s.After))
}

func ownerLabel(o Owner) string {
	if o.ID == "" {
		return "(none)"
	}
	return o.ID
}
