package closing

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSet(t *testing.T) {
	var s Set
	var called []string
	removeA, ok := s.Add(func() { called = append(called, "a") })
	assert.True(t, ok)
	_, ok = s.Add(func() { called = append(called, "b") })
	assert.True(t, ok)
	_, ok = s.Add(nil)
	assert.True(t, ok)
	removeA()
	s.Close()
	assert.Equal(t, []string{"b"}, called, "only what is still kept is called")
	s.Close()
	assert.Equal(t, []string{"b"}, called, "once")
	_, ok = s.Add(func() { called = append(called, "c") })
	assert.False(t, ok, "a closed set keeps nothing")
	s.Close()
	assert.Equal(t, []string{"b"}, called)
}
