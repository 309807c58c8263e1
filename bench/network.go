package main

import (
	"bytes"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/simba-go/simba/internal/faultproxy"
)

// storeAddr returns the host:port at which ep reaches store.
func storeAddr(ep endpoints, store string) (string, error) {
	switch store {
	case storeRedis:
		return ep.Redis, nil
	case storeSQL:
		cfg, err := mysql.ParseDSN(ep.DSN)
		if err != nil {
			return "", fmt.Errorf("mysql DSN: %w", err)
		}
		return cfg.Addr, nil
	case storePostgres:
		u, err := url.Parse(ep.PgDSN)
		if err != nil || u.Host == "" {
			return "", fmt.Errorf("postgres DSN: a postgres:// URL is needed to put a proxy in front of it")
		}
		return u.Host, nil
	case storeZooKeeper:
		return ep.ZooKeeper, nil
	case storeEtcd:
		return ep.Etcd, nil
	}
	return "", fmt.Errorf("store %s has no address", store)
}

// withAddr returns ep with the address of store replaced by addr.
func withAddr(ep endpoints, store, addr string) (endpoints, error) {
	switch store {
	case storeRedis:
		ep.Redis = addr
	case storeSQL:
		cfg, err := mysql.ParseDSN(ep.DSN)
		if err != nil {
			return ep, fmt.Errorf("mysql DSN: %w", err)
		}
		cfg.Addr = addr
		ep.DSN = cfg.FormatDSN()
	case storePostgres:
		u, err := url.Parse(ep.PgDSN)
		if err != nil || u.Host == "" {
			return ep, fmt.Errorf("postgres DSN: a postgres:// URL is needed to put a proxy in front of it")
		}
		u.Host = addr
		ep.PgDSN = u.String()
	case storeZooKeeper:
		ep.ZooKeeper = addr
	case storeEtcd:
		ep.Etcd = addr
	default:
		return ep, fmt.Errorf("store %s has no address", store)
	}
	return ep, nil
}

// proxied starts a proxy in front of store and returns it with the endpoints that reach
// the store through it.
func proxied(ep endpoints, store string) (*faultproxy.Proxy, endpoints, error) {
	addr, err := storeAddr(ep, store)
	if err != nil {
		return nil, ep, err
	}
	p, err := faultproxy.New(addr)
	if err != nil {
		return nil, ep, fmt.Errorf("proxy in front of %s: %w", store, err)
	}
	out, err := withAddr(ep, store, p.Addr())
	if err != nil {
		_ = p.Close()
		return nil, ep, err
	}
	return p, out, nil
}

// delayProxies puts a delayProxy in front of each of the stores but memory and returns the
// endpoints that reach the stores through them and a function that closes the proxies.
func delayProxies(ep endpoints, stores []string, delay time.Duration) (endpoints, func(), error) {
	var proxies []*delayProxy
	closeAll := func() {
		for _, p := range proxies {
			_ = p.Close()
		}
	}
	for _, st := range stores {
		if st == storeMemory {
			continue
		}
		addr, err := storeAddr(ep, st)
		if err != nil {
			closeAll()
			return ep, nil, err
		}
		p, err := newDelayProxy(addr, delay)
		if err != nil {
			closeAll()
			return ep, nil, fmt.Errorf("proxy in front of %s: %w", st, err)
		}
		proxies = append(proxies, p)
		if ep, err = withAddr(ep, st, p.Addr()); err != nil {
			closeAll()
			return ep, nil, err
		}
	}
	return ep, closeAll, nil
}

// writeNetwork describes the network figure and checks its floors against loopback's.
func (r *results) writeNetwork(b *bytes.Buffer) {
	n := r.Network
	d := n.Settings.Delay
	fmt.Fprintf(b, "The figures above again, for every store but memory, through a proxy in front of each store (one per store, in this program, on loopback; every client of every library goes through it, the holder processes of the failover figure too) that holds what it reads for %s in each direction before it writes it on: a round trip gains 2 × %s. The delay is per chunk, not per packet: each read from the socket (up to 32 KB: a request, a reply, a pipeline's worth, as the sender wrote it) is held %s from the moment it was read, then written on in order; chunks do not wait for each other beyond their order, so this adds latency, not a bandwidth limit. The proxy's writer sleeps in nanosleep(2) until shortly before a chunk is due and yields until then (Go's own timers wake up to a millisecond late), on the same %d cores as everything else; with its own hops, it adds a little more than the delay (the floor line below). Here round trips decide, not the store's CPU. Smaller samples than on loopback: %d cycles, %d hand-overs, a %v contended window, %d kills per library.\n\n",
		ms(d), ms(d), ms(d), r.Machine.Cores, n.Settings.Cycles, n.Settings.HandOvers, n.Settings.ContendWindow, n.Settings.Failovers)
	var parts []string
	for _, store := range allStores {
		near, nok := r.floor(store)
		far, fok := n.floor(store)
		if nok && fok {
			parts = append(parts, fmt.Sprintf("%s %s → %s (+%s)", storeTitle(store), ms(near.P50), ms(far.P50), ms(far.P50-near.P50)))
		}
	}
	if len(parts) > 0 {
		fmt.Fprintf(b, "The floor (one raw round trip, p50) against loopback's in this run: %s; the proxy was meant to add %s.\n", strings.Join(parts, ", "), ms(2*d))
	}
}
