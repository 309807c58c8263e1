package simba

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"sync/atomic"

	"github.com/simba-go/simba/internal/hostip"
)

// contenderCounter numbers the IDs HostContenderID hands out in this process.
var contenderCounter atomic.Int64

// HostContenderID returns a new contender ID of the form "{counter}:{pid}@{host-ip}", the
// format of JVM Simba's default generator: counter is process-wide and starts at 0, pid is
// this process's ID, and host-ip the first non-loopback address of this host.
//
// The IDs are unique within a process. Across processes they are unique only as long as
// no two processes share both a PID and an address: containers that all run their service
// as PID 1 behind one address (for example, with host networking on several hosts that
// NAT to one address, or several containers in one network namespace) produce the same
// IDs, and two contenders with one ID both believe they own the mutex, because the store's
// owner check is ID equality. Use UUIDContenderID in such deployments.
func HostContenderID() string {
	n := contenderCounter.Add(1) - 1
	return strconv.FormatInt(n, 10) + ":" + strconv.Itoa(os.Getpid()) + "@" + hostip.Address()
}

// UUIDContenderID returns a new random (version 4) UUID as 32 lower-case hexadecimal
// digits without dashes, the format of JVM Simba's UUID generator.
func UUIDContenderID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return hex.EncodeToString(b[:])
}
