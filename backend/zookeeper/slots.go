package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

var _ backend.SlotRecorder = (*contention)(nil)

// LastSlot reads the mutex's slot record, /simba-slot/<mutex>; the zero Slot when there
// is none.
func (c *contention) LastSlot(ctx context.Context) (backend.Slot, error) {
	s, _, err := c.readSlot(ctx)
	return s, err
}

// ClaimSlot records s if it is later than the recorded slot and its token not less: it
// reads the record and writes it with the version read (a setData), or creates it when
// there is none; when another claim wrote first, it reads again.
func (c *contention) ClaimSlot(ctx context.Context, s backend.Slot) (bool, error) {
	at, ok := s.Nanos()
	if !ok {
		return false, simba.InvalidArgument("slot instant", s.At, backend.SlotRange)
	}
	b, path := c.b, slotPath(c.p.Mutex)
	data := []byte(strconv.FormatInt(at, 10) + " " + strconv.FormatUint(s.Token, 10))
	for {
		rec, version, err := c.readSlot(ctx)
		switch {
		case err != nil:
			return false, err
		case version >= 0 && (!s.At.After(rec.At) || s.Token < rec.Token):
			return false, nil
		case version < 0:
			err = b.createSlot(ctx, path, data)
			if errors.Is(err, zk.ErrNodeExists) {
				continue // another claim created it first
			}
		default:
			_, err = ask(ctx, b, func() (*zk.Stat, error) { return b.conn.Set(path, data, version) })
			if errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode) {
				continue // another claim wrote first, or the record was deleted
			}
		}
		if err != nil {
			return false, b.explain(storeError("write", path, err))
		}
		return true, nil
	}
}

// readSlot reads the slot record and its data version; -1 when there is none.
func (c *contention) readSlot(ctx context.Context) (backend.Slot, int32, error) {
	path := slotPath(c.p.Mutex)
	n, err := c.b.get(ctx, path)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return backend.Slot{}, -1, nil
	case err != nil:
		return backend.Slot{}, 0, c.b.explain(storeError("read", path, err))
	}
	s, ok := parseSlot(string(n.data))
	if !ok {
		return backend.Slot{}, 0, fmt.Errorf("simba/zookeeper: %w: slot record %s holds %q, not \"<unix nanoseconds> <token>\"", simba.ErrRefused, path, n.data)
	}
	return s, n.st.Version, nil
}

// parseSlot parses a slot record's data, "<At in Unix nanoseconds> <token>".
func parseSlot(data string) (backend.Slot, bool) {
	at, token, ok := strings.Cut(data, " ")
	ns, err1 := strconv.ParseInt(at, 10, 64)
	t, err2 := strconv.ParseUint(token, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return backend.Slot{}, false
	}
	return backend.Slot{At: backend.SlotAt(ns), Token: t}, true
}

// createSlot creates the slot record at path, a persistent node, and /simba-slot, a
// container node, when missing.
func (b *Backend) createSlot(ctx context.Context, path string, data []byte) error {
	for range 4 {
		_, err := b.create(ctx, path, data, 0)
		if !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		if err := b.makeContainers(ctx, slotRoot); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
	}
	return fmt.Errorf("%s keeps disappearing: %w", slotRoot, zk.ErrNoNode)
}
