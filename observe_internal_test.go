package simba

import (
	"context"
	"errors"
	"fmt"
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

func TestEventNames(t *testing.T) {
	assert.Equal(t, "ok", outcome(nil))
	assert.Equal(t, "timeout", outcome(fmt.Errorf("x: %w", ErrTimeout)))
	assert.Equal(t, "error", outcome(errors.New("refused")))
	for cause, want := range map[error]string{
		nil:              "",
		context.Canceled: "released",
		ErrOwnerChanged:  "owner_changed",
		ErrLeaseExpired:  "expired",
		fmt.Errorf("%w: %w", ErrLeaseExpired, errors.New("down")): "store_error",
		errors.New("other"): "unknown",
	} {
		assert.Equal(t, want, reason(cause), "%v", cause)
	}
}
