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

// HostContenderID returns a new ID "{counter}:{pid}@{host-ip}", JVM Simba's default;
// containers sharing a PID and an address need UUIDContenderID.
func HostContenderID() string {
	n := contenderCounter.Add(1) - 1
	return strconv.FormatInt(n, 10) + ":" + strconv.Itoa(os.Getpid()) + "@" + hostip.Address()
}

// UUIDContenderID returns a random UUID, 32 hex digits: JVM Simba's other ID.
func UUIDContenderID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return hex.EncodeToString(b[:])
}
