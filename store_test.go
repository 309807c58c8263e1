package simba

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/simba-go/simba/backend"
)

func TestOwnerAt(t *testing.T) {
	sent := time.Now()
	r := backend.Record{Owner: "a", TTL: time.Second, Transition: 3 * time.Second, Held: 2 * time.Second, Token: 9}
	assert.Equal(t, Owner{ID: "a", AcquiredAt: sent.Add(-2 * time.Second), TTLAt: sent.Add(time.Second),
		TransitionAt: sent.Add(3 * time.Second), Token: 9}, ownerAt(r, sent))
	assert.True(t, ownerAt(backend.Record{}, sent).IsZero())
}
