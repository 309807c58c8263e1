// Package etcdurl opens simba's etcd backend from a store URL, for package storeurl and
// the simba command, which do not depend on the etcd client themselves:
//
//	if err := etcdurl.Register(); err != nil { ... }
//	s, err := storeurl.Open("etcd://etcd1:2379,etcd2:2379,etcd3:2379/app/locks?lease_ttl=10s")
//
// The URL:
//
//	etcd://[user:password@]host[:port][,host[:port]...][/prefix][?option=value...]
//
// The hosts are the members' client addresses (port 2379 by default), reached over plain
// HTTP/2 (TLS is not supported here: build the client yourself and use backend/etcd). The
// path is the key prefix without its leading '/', to which a '/' is appended: /app/locks
// keeps mutex m under app/locks/m/; without a path, under simba/ (etcd.DefaultPrefix). A
// user and password authenticate to etcd. The options:
//
//	dial_timeout   how long the client waits for a connection (default 5s)
//	lease_ttl      the backend's lease TTL, whole seconds (etcd.WithLeaseTTL; default 10s)
//
// Register is called explicitly rather than run when the package is imported for its side
// effects (as database/sql drivers are): the program then says where it opens etcd URLs,
// a registration cannot be lost to an unused import being dropped, and its error is
// returned rather than a panic.
package etcdurl

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/etcd"
	"github.com/simba-go/simba/storeurl"
)

// Scheme is the URL scheme Register registers.
const Scheme = "etcd"

var registered struct {
	once sync.Once
	err  error
}

// Register makes storeurl.Open open etcd:// URLs. Calling it again does nothing and
// returns what the first call returned.
func Register() error {
	registered.once.Do(func() { registered.err = storeurl.Register(Scheme, Open) })
	return registered.err
}

// Client returns the etcd client of a store that an etcd URL opened, nil for other stores.
// The store owns it: do not close it.
func Client(s *storeurl.Store) *clientv3.Client {
	c, _ := s.Client().(*clientv3.Client)
	return c
}

// Open opens the etcd backend that an etcd URL names, on a client of its own, for
// storeurl (Register). The client dials in the background; Close closes the backend and
// then the client. A malformed URL fails with an error wrapping simba.ErrInvalidArgument.
func Open(u *url.URL) (storeurl.Opened, error) {
	cfg, opts, err := parse(u)
	if err != nil {
		return storeurl.Opened{}, simba.InvalidArgument("store URL", u.Redacted(), err.Error())
	}
	client, err := clientv3.New(cfg)
	if err != nil {
		return storeurl.Opened{}, fmt.Errorf("simba/etcd: client for %s: %w", u.Redacted(), err)
	}
	b, err := etcd.New(client, opts...)
	if err != nil {
		_ = client.Close()
		return storeurl.Opened{}, err
	}
	h := holds{client: client, b: b}
	return storeurl.Opened{
		Backend:       b,
		Client:        client,
		List:          b.Mutexes,
		Close:         func() error { return errors.Join(b.Close(), client.Close()) },
		Holders:       h.list,
		ReleaseHolder: h.release,
	}, nil
}

// parse reads the client's configuration and the backend's options from an etcd URL.
func parse(u *url.URL) (clientv3.Config, []etcd.Option, error) {
	cfg := clientv3.Config{DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	var opts []etcd.Option
	if u.User != nil {
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
		if cfg.Username == "" {
			return cfg, nil, errors.New("a user name must come with the password")
		}
	}
	for _, h := range strings.Split(u.Host, ",") {
		if h == "" {
			continue
		}
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			host, port = h, "2379"
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || host == "" {
			return cfg, nil, fmt.Errorf("member %q: want host:port, the port a number from 1 to 65535", h)
		}
		cfg.Endpoints = append(cfg.Endpoints, net.JoinHostPort(host, port))
	}
	if len(cfg.Endpoints) == 0 {
		return cfg, nil, errors.New("no member")
	}
	if prefix := strings.Trim(u.Path, "/"); prefix != "" {
		opts = append(opts, etcd.WithPrefix(prefix+"/"))
	}
	q := u.Query()
	if q.Has("dial_timeout") {
		d, err := time.ParseDuration(q.Get("dial_timeout"))
		if err != nil || d <= 0 {
			return cfg, nil, fmt.Errorf("dial_timeout %q must be a positive duration such as 5s", q.Get("dial_timeout"))
		}
		cfg.DialTimeout = d
		q.Del("dial_timeout")
	}
	if q.Has("lease_ttl") {
		d, err := time.ParseDuration(q.Get("lease_ttl"))
		if err != nil || d < time.Second || d%time.Second != 0 {
			return cfg, nil, fmt.Errorf("lease_ttl %q must be a whole number of seconds such as 10s", q.Get("lease_ttl"))
		}
		opts = append(opts, etcd.WithLeaseTTL(d))
		q.Del("lease_ttl")
	}
	if len(q) > 0 {
		return cfg, nil, fmt.Errorf("unknown parameters %q", q.Encode())
	}
	return cfg, opts, nil
}
