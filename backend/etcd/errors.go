package etcd

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/simba-go/simba"
)

// storeError wraps an error of the client with the operation and key, and a refusal in
// simba.ErrRefused.
func storeError(op, key string, err error) error {
	if refused(err) {
		err = fmt.Errorf("%w: %w", simba.ErrRefused, err)
	}
	if key == "" {
		return fmt.Errorf("simba/etcd: %s: %w", op, err)
	}
	return fmt.Errorf("simba/etcd: %s %s: %w", op, key, err)
}

// refused reports whether err is an answer that no retry can cure: a missing permission,
// failed or missing authentication, a request larger than the server takes, or a store
// out of space (its quota alarm needs an administrator). Everything else (no answer, no
// leader, a timeout, a reset connection, too many requests) is an outage.
func refused(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	switch rpctypes.Error(err) {
	case rpctypes.ErrPermissionDenied, rpctypes.ErrAuthFailed, rpctypes.ErrUserEmpty, rpctypes.ErrUserNotFound,
		rpctypes.ErrRequestTooLarge, rpctypes.ErrTooManyOps, rpctypes.ErrNoSpace:
		return true
	}
	return false
}

// leaseNotFound reports whether err says that the lease does not exist (expired, or
// revoked).
func leaseNotFound(err error) bool { return errors.Is(err, rpctypes.ErrLeaseNotFound) }
