package main

import (
	"io"
	"net"
	"slices"
	"testing"
	"time"
)

// echo serves one echo server on loopback until the test ends.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	return ln.Addr().String()
}

// roundTrips returns the p50 of n one-byte round trips to addr.
func roundTrips(t *testing.T, addr string, n int) time.Duration {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	buf := []byte{1}
	var s []time.Duration
	for range n {
		began := time.Now()
		if _, err := c.Write(buf); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
		s = append(s, time.Since(began))
	}
	slices.Sort(s)
	return s[len(s)/2]
}

// TestDelayProxyHoldsEachWay checks that a round trip through the proxy takes at least
// the delay each way, and reports by how much more, against a proxy without delay.
func TestDelayProxyHoldsEachWay(t *testing.T) {
	upstream := echo(t)
	const delay = 500 * time.Microsecond
	var p50 [2]time.Duration
	for i, d := range []time.Duration{0, delay} {
		p, err := newDelayProxy(upstream, d)
		if err != nil {
			t.Fatal(err)
		}
		p50[i] = roundTrips(t, p.Addr(), 200)
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
	direct := roundTrips(t, upstream, 200)
	t.Logf("round trip p50: direct %v, through the proxy %v, with %v each way %v (+%v over the proxy alone)", direct, p50[0], delay, p50[1], p50[1]-p50[0])
	if p50[1] < 2*delay {
		t.Fatalf("round trip p50 %v through the proxy: less than the delay both ways, %v", p50[1], 2*delay)
	}
}

// TestDelayProxyKeepsOrderAndEnds checks that bytes arrive whole and in order, and that
// the proxy ends a connection when its upstream side ends and closes with a connection
// open.
func TestDelayProxyKeepsOrderAndEnds(t *testing.T) {
	p, err := newDelayProxy(echo(t), 200*time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 256*1024)
	for i := range want {
		want[i] = byte(i * 7)
	}
	go func() { _, _ = c.Write(want) }()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatal("the bytes came back changed or out of order")
	}
	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Close did not return within a minute with a connection open")
	}
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("the connection still answers after Close")
	}
}
