package simba_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/memory"
)

// withCounter is a handler that counts the loggers derived from it.
type withCounter struct {
	slog.Handler
	withs *atomic.Int32
}

func (h withCounter) WithAttrs(as []slog.Attr) slog.Handler {
	h.withs.Add(1)
	return withCounter{h.Handler.WithAttrs(as), h.withs}
}

func (h withCounter) Enabled(context.Context, slog.Level) bool { return false }

// Issue 35: a held mutex's memory grew by ~200 bytes with the default logger, because a
// contender's logger was derived with one With per attribute (its mutex, then its ID),
// each copying the logger and its handler.
func TestNewLockerDerivesItsLoggerOnce(t *testing.T) {
	b, err := memory.New(memory.NewStore())
	require.NoError(t, err)
	var withs atomic.Int32
	l, err := simba.NewLocker(b, "logger", simba.WithContenderID("c"),
		simba.WithLogger(slog.New(withCounter{slog.DiscardHandler, &withs})))
	require.NoError(t, err)
	defer l.Close()
	assert.EqualValues(t, 1, withs.Load(), "loggers derived by NewLocker")
}
