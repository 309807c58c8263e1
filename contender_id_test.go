package simba_test

import (
	"fmt"
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
)

func TestHostContenderID(t *testing.T) {
	re := regexp.MustCompile(`^(\d+):(\d+)@(.+)$`)
	a, b := simba.HostContenderID(), simba.HostContenderID()
	ma, mb := re.FindStringSubmatch(a), re.FindStringSubmatch(b)
	require.NotNil(t, ma, a)
	require.NotNil(t, mb, b)
	assert.Equal(t, fmt.Sprint(os.Getpid()), ma[2])
	var na, nb int
	fmt.Sscan(ma[1], &na)
	fmt.Sscan(mb[1], &nb)
	assert.Equal(t, na+1, nb, "the counter increments per ID")
	assert.NoError(t, simba.ValidateContenderID(a))
}

func TestUUIDContenderID(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{12}4[0-9a-f]{3}[89ab][0-9a-f]{15}$`)
	seen := map[string]bool{}
	for range 1000 {
		id := simba.UUIDContenderID()
		require.Regexp(t, re, id)
		require.False(t, seen[id])
		seen[id] = true
	}
}
