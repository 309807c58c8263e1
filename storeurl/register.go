package storeurl

import (
	"context"
	"errors"
	"net/url"
	"regexp"
	"slices"
	"sync"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// Opener opens the store a URL of a registered scheme names, for Open. It must dial
// nothing it can put off until the first store call, and fail a malformed URL with an
// error that wraps simba.ErrInvalidArgument and does not show the password.
type Opener func(u *url.URL) (Opened, error)

// Opened is what an Opener returns: the backend, the client it dialed, and the
// administrator's calls of its store. Release uses the backend's ReleaseOwner method,
// which deletes the owner's record only while it is the tenure looked up; a store whose
// backend has none cannot release.
type Opened struct {
	// Backend is the store's backend. Required.
	Backend simba.Backend
	// Client is the client the opener dialed, which Store.Client returns.
	Client any
	// List returns the names of the mutexes the store holds records for. Required.
	List func(ctx context.Context) ([]string, error)
	// Close closes the backend and then the client. Required.
	Close func() error
	// Holders lists the holders of the semaphores or read-write locks (kind) of the store,
	// of name alone when it is not "", for Store.Holders; ReleaseHolder frees one hold if
	// it is still the tenure listed, and reports whether it did. Optional, both or neither:
	// without them the store lists no holds.
	Holders       func(ctx context.Context, k backend.Kind, name string) ([]Holder, error)
	ReleaseHolder func(ctx context.Context, h Holder) (released bool, err error)
}

var registry struct {
	mu      sync.RWMutex
	openers map[string]Opener
}

// builtin are the schemes Open knows itself.
var builtin = []string{"redis", "rediss", "redis-sentinel", "rediss-sentinel", "mysql", "mariadb", "postgres", "postgresql", "zk", "zookeeper"}

// schemeSyntax is RFC 3986's, in lower case: url.Parse lowers the scheme of every URL.
var schemeSyntax = regexp.MustCompile(`^[a-z][a-z0-9+.-]*$`)

// Register makes Open open URLs of scheme with open, for a store whose client the module
// of storeurl does not depend on: package github.com/simba-go/simba/backend/etcd/etcdurl
// registers etcd. A scheme is registered once, and none of Open's own can be; errors wrap
// simba.ErrInvalidArgument. Safe for concurrent use.
func Register(scheme string, open Opener) error {
	switch {
	case !schemeSyntax.MatchString(scheme):
		return simba.InvalidArgument("scheme", scheme, "must be a URL scheme in lower case")
	case open == nil:
		return simba.InvalidArgument("opener", nil, "must not be nil")
	case slices.Contains(builtin, scheme):
		return simba.InvalidArgument("scheme", scheme, "is opened by storeurl itself")
	}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if _, ok := registry.openers[scheme]; ok {
		return simba.InvalidArgument("scheme", scheme, "is registered already")
	}
	if registry.openers == nil {
		registry.openers = make(map[string]Opener)
	}
	registry.openers[scheme] = open
	return nil
}

// registered returns the opener of scheme, if any.
func registered(scheme string) (Opener, bool) {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	open, ok := registry.openers[scheme]
	return open, ok
}

// openRegistered opens u with a registered opener.
func (s *Store) openRegistered(open Opener, u *url.URL) error {
	o, err := open(u)
	if err != nil {
		return err
	}
	if o.Backend == nil || o.List == nil || o.Close == nil {
		if o.Close != nil {
			_ = o.Close()
		}
		return errors.New("storeurl: the opener of " + u.Scheme + " returned no backend, List or Close")
	}
	s.backend, s.client, s.list = o.Backend, o.Client, o.List
	s.closers = append(s.closers, o.Close)
	if o.Holders != nil && o.ReleaseHolder != nil {
		s.holds = holds{list: o.Holders, release: o.ReleaseHolder}
	}
	s.release = func(context.Context, string, simba.Owner) error {
		return errors.New("this store cannot release a mutex in its owner's name")
	}
	return nil
}

// Client returns the client that a registered scheme's opener dialed (an etcd URL's
// *clientv3.Client; etcdurl.Client returns it typed), nil for Open's own schemes, which
// have accessors of their own. The Store owns it: do not close it.
func (s *Store) Client() any { return s.client }
