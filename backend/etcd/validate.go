package etcd

import (
	"strconv"
	"strings"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

var _ backend.Validator = (*Backend)(nil)

const (
	// MaxMutexLength is the longest mutex name the backend accepts, in bytes, and
	// MaxContenderIDLength the longest contender ID (the value of its key). etcd refuses
	// requests over 1.5 MiB by default; these limits keep every request far below that.
	MaxMutexLength       = 1024
	MaxContenderIDLength = 1024
)

// ValidateMutex checks that name is one segment of a key: no '/', which would put one
// mutex's keys under another's, and at most MaxMutexLength bytes. simba.ValidateMutex's
// rules apply too. It needs no connection and may be called on a nil *Backend.
func (*Backend) ValidateMutex(name string) error {
	switch {
	case strings.ContainsRune(name, '/'):
		return simba.InvalidArgument("mutex", name, "must not contain '/': it is one segment of the keys <prefix><mutex>/...")
	case len(name) > MaxMutexLength:
		return simba.InvalidArgument("mutex", name, "must be at most "+strconv.Itoa(MaxMutexLength)+" bytes for etcd")
	}
	return nil
}

// ValidateContenderID checks that id, the value of the contender's key, is at most
// MaxContenderIDLength bytes. It needs no connection and may be called on a nil *Backend.
func (*Backend) ValidateContenderID(id string) error {
	if len(id) > MaxContenderIDLength {
		return simba.InvalidArgument("contender ID", id, "must be at most "+strconv.Itoa(MaxContenderIDLength)+" bytes for etcd")
	}
	return nil
}
