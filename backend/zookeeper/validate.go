package zookeeper

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

var _ backend.Validator = (*Backend)(nil)

const (
	// MaxMutexLength is the longest mutex name the backend accepts, in bytes, and
	// MaxContenderIDLength the longest contender ID (the data of its node). ZooKeeper
	// refuses a request longer than its jute.maxbuffer (1 MiB by default) by dropping the
	// connection, and with it the session every mutex of the backend shares: a name near
	// that size would end every tenure of the backend. These limits keep each request far
	// below it.
	MaxMutexLength       = 1024
	MaxContenderIDLength = 1024
)

// ValidateMutex checks that name can be a single ZooKeeper node name, since the mutex
// lives at /simba/<name>: no '/', so neither nested nor empty path segments; not "." or
// ".."; valid UTF-8 without the characters ZooKeeper refuses in paths (NUL, U+0001–U+001F,
// U+007F–U+009F, U+D800–U+F8FF, U+FFF0–U+FFFF); at most MaxMutexLength bytes. Names are
// used as they are, never escaped,
// so that a JVM Simba service naming the same mutex meets at the same node. Services
// call it before any I/O, after simba.ValidateMutex; the error wraps
// simba.ErrInvalidArgument. It needs no connection and may be called on a nil *Backend.
func (*Backend) ValidateMutex(name string) error {
	switch {
	case name == "":
		return simba.InvalidArgument("mutex", name, "must not be empty")
	case !utf8.ValidString(name):
		return simba.InvalidArgument("mutex", name, "must be valid UTF-8")
	case strings.ContainsRune(name, '/'):
		return simba.InvalidArgument("mutex", name, "must not contain '/': it names one ZooKeeper node under "+rootPath)
	case name == "." || name == "..":
		return simba.InvalidArgument("mutex", name, `must not be "." or "..": ZooKeeper refuses them as node names`)
	case len(name) > MaxMutexLength:
		return simba.InvalidArgument("mutex", name, "must be at most "+strconv.Itoa(MaxMutexLength)+" bytes for ZooKeeper")
	}
	for _, r := range name {
		if forbidden(r) {
			return simba.InvalidArgument("mutex", name, fmt.Sprintf("must not contain %U: ZooKeeper refuses it in paths", r))
		}
	}
	return nil
}

// ValidateContenderID checks that id, the data of the contender's node, which ZooKeeper
// stores as bytes, is at most MaxContenderIDLength bytes; simba.ValidateContenderID's
// rules apply too. It needs no connection and may be called on a nil *Backend.
func (*Backend) ValidateContenderID(id string) error {
	if len(id) > MaxContenderIDLength {
		return simba.InvalidArgument("contender ID", id, "must be at most "+strconv.Itoa(MaxContenderIDLength)+" bytes for ZooKeeper")
	}
	return nil
}

// forbidden reports whether ZooKeeper refuses r in a path (its PathUtils rules).
func forbidden(r rune) bool {
	switch {
	case r <= 0x1f, r >= 0x7f && r <= 0x9f:
		return true
	case r >= 0xd800 && r <= 0xf8ff, r >= 0xfff0 && r <= 0xffff:
		return true
	}
	return false
}
