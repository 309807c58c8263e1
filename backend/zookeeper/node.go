package zookeeper

import (
	"crypto/rand"
	"fmt"
	"path"
	"slices"
	"strings"
)

// Node layout, shared with JVM Simba (Curator's LeaderLatch with protection).
const (
	// rootPath is the parent of every mutex node.
	rootPath = "/simba"
	// latchName is the name Curator's LeaderLatch gives its nodes; ZooKeeper appends
	// the sequence number to it.
	latchName = "latch-"
	// protectionMark starts the name of a node created with Curator's protection: the
	// mark, a UUID and a dash come before latchName.
	protectionMark = "_c_"
	// seqDigits is the length of the sequence number ZooKeeper appends: 10 digits,
	// zero-padded.
	seqDigits = 10
)

// Nodes of simba's own, beside the JVM layout: JVM contenders never list them.
const (
	// valueRoot is the parent of every mutex's value nodes: /simba-value/<mutex> holds an
	// EPHEMERAL node per contender node that marks a value, named after that node's
	// protection (valueName), made with it in one transaction.
	valueRoot = "/simba-value"
	// slotRoot is the parent of every mutex's slot record, /simba-slot/<mutex>.
	slotRoot = "/simba-slot"
	// protectedLen is the length of a protection's mark and UUID, "_c_<uuid>".
	protectedLen = len(protectionMark) + 36
	// valueVersion is the UUID version digit of a protection whose node has a value node:
	// 8, RFC 9562's version for custom UUIDs (Curator's, and simba's nodes without a
	// value, carry random UUIDs, version 4).
	valueVersion = '8'
	// versionAt is where the UUID's version digit is in a protected node's name.
	versionAt = len(protectionMark) + 14
)

// mutexPath returns the node under which the contenders of mutex create their nodes.
func mutexPath(mutex string) string { return rootPath + "/" + mutex }

// sequence returns the sequence number of a latch node's name: the 10 digits after the
// last "latch-", which must end the name. ok is false for any other name; such nodes are
// not contenders.
func sequence(name string) (seq int64, ok bool) { return sequenceAfter(name, latchName) }

// sequenceAfter returns the sequence number of a node's name: the 10 digits after the
// last lockName, which must end the name.
func sequenceAfter(name, lockName string) (seq int64, ok bool) {
	n := len(name)
	if n < len(lockName)+seqDigits || name[n-seqDigits-len(lockName):n-seqDigits] != lockName {
		return 0, false
	}
	for _, d := range []byte(name[n-seqDigits:]) {
		if d < '0' || d > '9' {
			return 0, false
		}
		seq = seq*10 + int64(d-'0')
	}
	return seq, true
}

// latch is one contender's node, as listed under the mutex node.
type latch struct {
	name string
	seq  int64
}

// latches returns the contender nodes among children, lowest sequence first: the owner
// first, then the queue in order. The order is by sequence number, not by name (the
// protection prefix before "latch-" differs from node to node); names that are not
// latch nodes are left out.
func latches(children []string) []latch {
	out := make([]latch, 0, len(children))
	for _, name := range children {
		if seq, ok := sequence(name); ok {
			out = append(out, latch{name: name, seq: seq})
		}
	}
	slices.SortFunc(out, compareLatches)
	return out
}

// compareLatches orders latch nodes by sequence number, then by name.
func compareLatches(a, b latch) int {
	if a.seq != b.seq {
		if a.seq < b.seq {
			return -1
		}
		return 1
	}
	return strings.Compare(a.name, b.name)
}

// index returns the position of the node called name in l, or -1.
func index(l []latch, name string) int {
	return slices.IndexFunc(l, func(n latch) bool { return n.name == name })
}

// newProtection returns a fresh protection prefix, "_c_<uuid>-", with a random (version 4)
// UUID in its canonical form, as Curator writes it. A node created under it can be found
// again after a create whose reply was lost.
func newProtection() string {
	var u [16]byte
	_, _ = rand.Read(u[:]) // never fails (crypto/rand)
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%s%x-%x-%x-%x-%x-", protectionMark, u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// markValue returns the protection prefix p (newProtection's) with its UUID marked as
// that of a node with a value node.
func markValue(p string) string { return p[:versionAt] + string(valueVersion) + p[versionAt+1:] }

// valueName returns the name of the value node of the contender node called name, its
// protection's mark and UUID ("_c_<uuid>"); ok is false when name marks no value.
func valueName(name string) (string, bool) {
	if len(name) <= protectedLen || !strings.HasPrefix(name, protectionMark) || name[versionAt] != valueVersion || name[protectedLen] != '-' {
		return "", false
	}
	return name[:protectedLen], true
}

// valuesPath returns the node under which the value nodes of mutex's contenders are.
func valuesPath(mutex string) string { return valueRoot + "/" + mutex }

// slotPath returns the node that records mutex's last slot.
func slotPath(mutex string) string { return slotRoot + "/" + mutex }

// base returns the last element of a node path.
func base(p string) string { return path.Base(p) }
