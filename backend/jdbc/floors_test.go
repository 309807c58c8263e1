package jdbc

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFloors(t *testing.T) {
	var f floors
	f.join("m")
	_, back := f.saw("m", 0, 10)
	assert.False(t, back)
	assert.Equal(t, uint64(10), f.get("m"))
	_, back = f.saw("m", 5, 7)
	assert.False(t, back, "sent before 10 was seen: an older answer, not a regression")
	prev, back := f.saw("m", 10, 2)
	assert.True(t, back)
	assert.Equal(t, uint64(10), prev)
	_, back = f.saw("m", 10, 3)
	assert.False(t, back, "reported once per step down")
	_, back = f.saw("m", 10, 1)
	assert.True(t, back, "another step down")
	_, back = f.saw("m", 10, 11)
	assert.False(t, back)
	_, back = f.saw("m", 11, 4)
	assert.True(t, back)
	assert.Equal(t, uint64(11), f.get("m"), "the floor stays")
}

func TestFloorsForgetIdleMutexesOnly(t *testing.T) {
	var f floors
	f.join("busy")
	f.saw("busy", 0, 7)
	for i := range maxIdleFloors + 10 {
		name := fmt.Sprint("m", i)
		f.join(name)
		f.saw(name, 0, 1)
		f.leave(name)
	}
	assert.LessOrEqual(t, len(f.m), maxIdleFloors+1)
	assert.Equal(t, uint64(7), f.get("busy"), "a mutex with a running contention is kept")
}
