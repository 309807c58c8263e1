package simba_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/simba-go/simba"
)

func TestOwnerPredicates(t *testing.T) {
	now := time.Now()
	o := simba.Owner{ID: "a", TTLAt: now.Add(time.Second), TransitionAt: now.Add(2 * time.Second), Token: 3}
	assert.True(t, o.InTTL(now))
	assert.False(t, o.InTTL(now.Add(time.Second)), "ttlAt itself is outside the TTL")
	assert.True(t, o.InTransition(now.Add(2*time.Second)), "transitionAt itself is inside the window")
	assert.False(t, o.InTransition(now.Add(2*time.Second+1)))
	assert.Equal(t, o.InTransition(now.Add(time.Second)), o.HasOwner(now.Add(time.Second)))
	assert.True(t, o.OwnedBy("a"))
	assert.False(t, o.OwnedBy("b"))
	assert.False(t, o.IsZero())

	var none simba.Owner
	assert.True(t, none.IsZero())
	assert.False(t, none.HasOwner(now))
	assert.False(t, none.InTTL(now))
	assert.False(t, none.OwnedBy(""), "the empty ID owns nothing")
	assert.Equal(t, "no owner", none.String())
	assert.Contains(t, o.String(), "token 3")
}

func TestStatePredicates(t *testing.T) {
	a, b := simba.Owner{ID: "a"}, simba.Owner{ID: "b"}
	s := simba.State{Before: a, After: b}
	assert.True(t, s.Changed())
	assert.True(t, s.Acquired("b"))
	assert.False(t, s.Acquired("a"))
	assert.True(t, s.Released("a"))
	assert.False(t, s.Released("b"))
	renewal := simba.State{Before: a, After: a}
	assert.False(t, renewal.Changed())
	assert.False(t, renewal.Acquired("a"))
	assert.False(t, renewal.Released("a"))
	assert.Equal(t, "(none) -> a", simba.State{After: a}.String())
}

func TestStatusString(t *testing.T) {
	assert.Equal(t, "INITIAL", simba.Status(0).String())
	assert.Equal(t, "RUNNING", simba.StatusRunning.String())
	assert.Equal(t, "Status(9)", simba.Status(9).String())
	assert.True(t, simba.StatusStarting.Active())
	assert.False(t, simba.StatusStopping.Active())
}
