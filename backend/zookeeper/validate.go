package zookeeper

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/simba-go/simba"
)

var _ simba.Validator = (*Backend)(nil)

// ValidateMutex checks that name can be a single ZooKeeper node name, since the mutex
// lives at /simba/<name>: no '/', so neither nested nor empty path segments; not "." or
// ".."; valid UTF-8 without the characters ZooKeeper refuses in paths (NUL, U+0001–U+001F,
// U+007F–U+009F, U+D800–U+F8FF, U+FFF0–U+FFFF). Names are used as they are, never escaped,
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
	}
	for _, r := range name {
		if forbidden(r) {
			return simba.InvalidArgument("mutex", name, fmt.Sprintf("must not contain %U: ZooKeeper refuses it in paths", r))
		}
	}
	return nil
}

// ValidateContenderID accepts every ID that simba.ValidateContenderID accepts: the ID is
// the data of the contender's node, which ZooKeeper stores as bytes. It exists so that
// Backend implements simba.Validator.
func (*Backend) ValidateContenderID(string) error { return nil }

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
