// Package hostip finds the address that names this host in default contender IDs.
package hostip

import (
	"net"
	"sync"
)

// Address returns the first non-loopback IPv4 address of an interface that is up, else
// the first such IPv6 address, else "127.0.0.1". The answer is computed once per process.
var Address = sync.OnceValue(func() string {
	ifaces, err := net.Interfaces()
	if err != nil {
		return "127.0.0.1"
	}
	return pick(ifaces, func(i net.Interface) ([]net.Addr, error) { return i.Addrs() })
})

func pick(ifaces []net.Interface, addrs func(net.Interface) ([]net.Addr, error)) string {
	var v6 string
	for _, iface := range ifaces {
		if iface.Flags&net.FlagUp == 0 || iface.Flags&net.FlagLoopback != 0 {
			continue
		}
		list, err := addrs(iface)
		if err != nil {
			continue
		}
		for _, a := range list {
			ipnet, ok := a.(*net.IPNet)
			if !ok || ipnet.IP.IsLoopback() || ipnet.IP.IsLinkLocalUnicast() {
				continue
			}
			if ip4 := ipnet.IP.To4(); ip4 != nil {
				return ip4.String()
			}
			if v6 == "" {
				v6 = ipnet.IP.String()
			}
		}
	}
	if v6 != "" {
		return v6
	}
	return "127.0.0.1"
}
