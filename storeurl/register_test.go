package storeurl_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/memory"
	"github.com/simba-go/simba/storeurl"
)

// registrations numbers TestRegister's scheme: a scheme stays registered for the
// process, and -count runs the test again in it.
var registrations atomic.Int64

// A registered scheme opens through its opener: Open hands it the parsed URL, and the
// Store serves its backend, client, list and close.
func TestRegister(t *testing.T) {
	scheme := fmt.Sprintf("test-store-%d", registrations.Add(1))
	for _, bad := range []struct {
		scheme string
		open   storeurl.Opener
	}{
		{"", nil}, {"Upper", nil}, {"1abc", nil}, {"redis", nil}, {"zk", nil}, {"fine-scheme", nil},
	} {
		open := bad.open
		if bad.scheme != "fine-scheme" {
			open = func(*url.URL) (storeurl.Opened, error) { return storeurl.Opened{}, nil }
		}
		assert.ErrorIs(t, storeurl.Register(bad.scheme, open), simba.ErrInvalidArgument, "%q", bad.scheme)
	}

	closed := 0
	var got *url.URL
	b, err := memory.New(memory.NewStore())
	require.NoError(t, err)
	require.NoError(t, storeurl.Register(scheme, func(u *url.URL) (storeurl.Opened, error) {
		got = u
		if u.Query().Has("bad") {
			return storeurl.Opened{}, simba.InvalidArgument("store URL", u.Redacted(), "bad option")
		}
		return storeurl.Opened{
			Backend: b,
			Client:  "the client",
			List:    func(context.Context) ([]string, error) { return []string{"b", "a", "b"}, nil },
			Close:   func() error { closed++; return b.Close() },
		}, nil
	}))
	assert.ErrorIs(t, storeurl.Register(scheme, func(*url.URL) (storeurl.Opened, error) { return storeurl.Opened{}, nil }),
		simba.ErrInvalidArgument, "registered twice")

	_, err = storeurl.Open(scheme + "://user:secret@h1:1,h2:2/prefix?bad=1")
	require.ErrorIs(t, err, simba.ErrInvalidArgument)
	assert.NotContains(t, err.Error(), "secret")

	s, err := storeurl.Open(scheme + "://h1:1,h2:2/prefix")
	require.NoError(t, err)
	assert.Equal(t, "h1:1,h2:2", got.Host)
	assert.Equal(t, "/prefix", got.Path)
	assert.Equal(t, b, s.Backend())
	assert.Equal(t, "the client", s.Client())
	names, err := s.List(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, names)
	err = s.Release(t.Context(), "m", simba.Owner{ID: "x", Token: 1})
	assert.Error(t, err, "a backend without ReleaseOwner cannot release")
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
	assert.Equal(t, 1, closed)
	_, err = s.List(t.Context())
	assert.True(t, errors.Is(err, simba.ErrClosed))
}

// An etcd URL without etcdurl registered says where the scheme comes from.
func TestUnregisteredScheme(t *testing.T) {
	_, err := storeurl.Open("etcd://127.0.0.1:2379")
	require.ErrorIs(t, err, simba.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "etcdurl.Register")
}
