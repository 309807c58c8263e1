package zookeeper_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/zookeeper"
)

// Names that cannot be one ZooKeeper node name under /simba are rejected before any I/O:
// the backend here has no connection at all.
func TestValidateMutex(t *testing.T) {
	var b *zookeeper.Backend
	bad := []string{
		"", "a/b", "/a", "a/", "a//b", ".", "..", "a\x00b", "a\x01", "a\x1fb", "a\x7fb", "a\u0085b", "a\u009fb",
		"a\ue000b", "a\uf8ffb", "a\ufff0b", "a\uffffb", "\xff\xfe",
	}
	for _, name := range bad {
		err := b.ValidateMutex(name)
		assert.ErrorIs(t, err, simba.ErrInvalidArgument, "%q", name)
		var ae *simba.ArgumentError
		if assert.ErrorAs(t, err, &ae, "%q", name) {
			assert.Equal(t, "mutex", ae.Field)
		}
	}
	good := []string{"orders", "a.b", "...", ".a", "a..", "zookeeper", "é-ü", "日本", "a b", "a\u00a0b", "a\uf900b", "a\ufeffb", "x\U0001F600"}
	for _, name := range good {
		assert.NoError(t, b.ValidateMutex(name), "%q", name)
	}
	assert.NoError(t, b.ValidateContenderID("any id: 1@10.0.0.1"))
}

// A name or ID longer than a request ZooKeeper takes made the server drop the connection,
// and with it the session every mutex of the backend shares: a 1.1 MiB name passed
// validation, its Start timed out with a 1.1 MB error, and the owner of another mutex on
// the same backend lost its tenure (adversarial review, stop 32). Both are now limited,
// before any I/O, and the error quotes the start of the value only.
func TestValidateLengths(t *testing.T) {
	var b *zookeeper.Backend
	assert.NoError(t, b.ValidateMutex(strings.Repeat("m", zookeeper.MaxMutexLength)))
	assert.NoError(t, b.ValidateContenderID(strings.Repeat("c", zookeeper.MaxContenderIDLength)))
	for _, err := range []error{
		b.ValidateMutex(strings.Repeat("m", zookeeper.MaxMutexLength+1)),
		b.ValidateContenderID(strings.Repeat("c", zookeeper.MaxContenderIDLength+1)),
		b.ValidateMutex(strings.Repeat("é", 600)),
	} {
		assert.ErrorIs(t, err, simba.ErrInvalidArgument)
		assert.Less(t, len(err.Error()), 200, "one short line: %s", err)
	}
	huge := strings.Repeat("x", 1100*1024)
	_, err := simba.NewService(b, simba.ContenderFuncs{MutexName: huge, ID: "c"})
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)
	assert.Less(t, len(err.Error()), 200, "one short line")
	_, err = simba.NewLocker(b, "m", simba.WithContenderID(huge))
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)
}

// Services apply the backend's rules when they are created, before any I/O.
func TestServicesRejectBadNames(t *testing.T) {
	b := newBackend(t)
	for _, name := range []string{"a/b", "..", "a\ue000"} {
		_, err := simba.NewLocker(b, name)
		assert.ErrorIs(t, err, simba.ErrInvalidArgument, "%q", name)
		_, err = simba.NewService(b, simba.ContenderFuncs{MutexName: name, ID: "c"})
		assert.ErrorIs(t, err, simba.ErrInvalidArgument, "%q", name)
		_, err = simba.NewRetrievalService(b, simba.RetrieverFunc{MutexName: name})
		assert.ErrorIs(t, err, simba.ErrInvalidArgument, "%q", name)
	}
}

func TestNewRejectsBadArguments(t *testing.T) {
	calls := 0
	connect := func(zk.EventCallback) (*zk.Conn, <-chan zk.Event, error) {
		calls++
		return nil, nil, nil
	}
	cases := map[string]struct {
		connect zookeeper.Connect
		opts    []zookeeper.Option
	}{
		"nil connect":  {nil, nil},
		"empty acl":    {connect, []zookeeper.Option{zookeeper.WithACL(nil)}},
		"nil logger":   {connect, []zookeeper.Option{zookeeper.WithLogger(nil)}},
		"queue limit":  {connect, []zookeeper.Option{zookeeper.WithQueueWatchLimit(-1)}},
		"nil *zk.Conn": {connect, nil},
	}
	for name, c := range cases {
		_, err := zookeeper.New(c.connect, c.opts...)
		assert.ErrorIs(t, err, simba.ErrInvalidArgument, name)
	}
	assert.Equal(t, 1, calls, "connect was called although an option was invalid")
	_, err := zookeeper.New(connect, zookeeper.WithLogger(slog.New(slog.DiscardHandler)), zookeeper.WithACL(zk.WorldACL(zk.PermAll)))
	assert.ErrorIs(t, err, simba.ErrInvalidArgument) // nil *zk.Conn again
}
