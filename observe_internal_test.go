package simba

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A reader slower than the changes gets the latest owner, not a backlog.
func TestOfferCoalesces(t *testing.T) {
	ch := make(chan Owner, 1)
	for _, id := range []string{"a", "", "b", "c"} {
		offer(ch, Owner{ID: id})
	}
	assert.Equal(t, Owner{ID: "c"}, <-ch)
	assert.Empty(t, ch)
	offer(ch, Owner{})
	assert.Equal(t, Owner{}, <-ch)
}
