package hostip

import (
	"errors"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPick(t *testing.T) {
	up := net.FlagUp
	lo := net.FlagUp | net.FlagLoopback
	addrs := map[string][]net.Addr{
		"lo":   {&net.IPNet{IP: net.ParseIP("127.0.0.1")}},
		"v6":   {&net.IPNet{IP: net.ParseIP("fe80::1")}, &net.IPNet{IP: net.ParseIP("2001:db8::7")}},
		"eth0": {&net.IPNet{IP: net.ParseIP("10.1.2.3")}},
		"down": {&net.IPNet{IP: net.ParseIP("10.9.9.9")}},
		"bad":  nil,
	}
	get := func(i net.Interface) ([]net.Addr, error) {
		if i.Name == "bad" {
			return nil, errors.New("boom")
		}
		return addrs[i.Name], nil
	}
	cases := []struct {
		name   string
		ifaces []net.Interface
		want   string
	}{
		{"ipv4 preferred", []net.Interface{{Name: "lo", Flags: lo}, {Name: "v6", Flags: up}, {Name: "eth0", Flags: up}}, "10.1.2.3"},
		{"ipv6 fallback, link-local skipped", []net.Interface{{Name: "lo", Flags: lo}, {Name: "bad", Flags: up}, {Name: "v6", Flags: up}}, "2001:db8::7"},
		{"down interfaces skipped", []net.Interface{{Name: "down"}}, "127.0.0.1"},
		{"nothing", nil, "127.0.0.1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, pick(c.ifaces, get))
		})
	}
	assert.NotEmpty(t, Address())
}
