package redis

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/internal/closing"
)

// Limits on names, in bytes. Redis itself would take far longer ones, but every call
// carries the keys and channels built from them.
const (
	// MaxMutexLength is the longest mutex name the backend accepts.
	MaxMutexLength = 512
	// MaxContenderIDLength is the longest contender ID the backend accepts.
	MaxContenderIDLength = 512
)

// Backend is simba's Redis backend: a simba.Backend on a go-redis client. Create it with
// New; it is safe for concurrent use and serves any number of services, lockers and
// schedulers. Close it when done: it owns one subscription connection (opened the first
// time one of its contenders has to wait) and the two goroutines that serve it, never the
// client. A Backend must not be copied.
type Backend struct {
	client       goredis.UniversalClient
	exact        any  // "1" if PUBLISH and PUBSUB NUMSUB count every subscriber (not a Cluster), else "0"
	slotsMove    bool // not a standalone or Sentinel client: a Cluster's slots move (see scriptKeys)
	log          *slog.Logger
	hub          *hub
	scripts      *runner
	renewals     *renewals   // nil on a Cluster: renewals go one by one
	checked      atomic.Bool // the server answered a start-up check
	closed       atomic.Bool
	regressions  atomic.Uint64
	unlisted     unlistedIDs // IDs whose last contention here left the waiting set
	participants closing.Set // the Participant.Closed of open contentions

	nonceBase   uint64                // random: the first contention's nonce prefix (see noncePrefix)
	contentions atomic.Uint64         // contentions that take grants opened so far
	lastNames   atomic.Pointer[names] // the last contention's names, for the next of the same participant
}

var (
	_ simba.Backend          = (*Backend)(nil)
	_ backend.Validator      = (*Backend)(nil)
	_ backend.DeadlineKeeper = (*Backend)(nil)
	_ backend.RenewalBatcher = (*Backend)(nil)
)

// New returns a backend on client, which may be a standalone, Sentinel (failover) or
// Cluster client; the backend neither dials on its own nor closes the client.
//
// Every store call carries the service's context deadline. go-redis applies context
// deadlines to its sockets only when the client's ContextTimeoutEnabled option is true;
// otherwise a call that hangs is bounded by the client's ReadTimeout and WriteTimeout
// instead, and Stop may take that long when the server does not answer. Ownership is not
// affected: belief ends at the local TTL end either way.
//
// New returns an error wrapping simba.ErrInvalidArgument for a nil client or an invalid
// option. It does no I/O.
func New(client goredis.UniversalClient, opts ...Option) (*Backend, error) {
	if isNil(client) {
		return nil, simba.InvalidArgument("client", nil, "must not be nil")
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	switch {
	case cfg.minAvailableSet:
		return nil, simba.InvalidArgument("min available", cfg.minAvailable, "not accepted by New: only a Quorum has several instances")
	case cfg.recheckSet:
		return nil, simba.InvalidArgument("recheck after", cfg.recheck, "not accepted by New: only a Quorum leaves instances out")
	}
	return newBackend(client, cfg), nil
}

func newBackend(client goredis.UniversalClient, cfg config) *Backend {
	// A standalone or Sentinel client talks to one server, which counts every subscriber;
	// a Cluster node counts only its own, and other clients are not known.
	_, standalone := client.(*goredis.Client)
	b := &Backend{
		client:    client,
		exact:     flag(standalone),
		slotsMove: !standalone,
		log:       cfg.logger,
		hub:       newHub(client, cfg.logger, cfg.ping),
	}
	b.scripts = &runner{client: client, log: cfg.logger}
	var seed [8]byte
	_, _ = rand.Read(seed[:]) // never fails (crypto/rand)
	b.nonceBase = binary.LittleEndian.Uint64(seed[:])
	if standalone {
		b.renewals = newRenewals(b.scripts)
	}
	return b
}

// KeepsDeadlines reports whether the backend's calls return by their context's deadline
// (backend.DeadlineKeeper): on a standalone or Sentinel client created with
// ContextTimeoutEnabled, not on a ClusterClient, whose first call looks the server's
// commands up under a timeout of its own.
func (b *Backend) KeepsDeadlines() bool {
	c, ok := b.client.(*goredis.Client)
	return ok && c.Options().ContextTimeoutEnabled
}

// BatchesRenewals reports whether the renewals that reach the backend together go as one
// script (backend.RenewalBatcher): on a standalone server or Sentinel's primary, not on a
// Cluster, where the keys of one script must share a hash slot.
func (b *Backend) BatchesRenewals() bool { return b.renewals != nil }

// unanswered looks at a call that failed: when no server answered it (a connection
// refused or broken, a deadline) and the client is a ClusterClient, it asks the client to
// reload its slot map. go-redis otherwise goes on dialing a primary that died, after its
// replica has taken its slots over, until its periodic reload (every 60 s by default;
// go-redis issue #3979). The client reloads in the background, at most one reload at a
// time.
func (b *Backend) unanswered(err error) {
	cc, ok := b.client.(*goredis.ClusterClient)
	if !ok || err == nil || errors.Is(err, goredis.Nil) {
		return
	}
	var reply goredis.Error
	if errors.As(err, &reply) && !isClusterDown(reply) {
		return // the server answered
	}
	cc.ReloadState(context.Background())
}

// isClusterDown reports whether a reply says the cluster cannot serve the slot now
// (CLUSTERDOWN, while a failover is under way): worth a reload too.
func isClusterDown(reply goredis.Error) bool {
	return strings.HasPrefix(reply.Error(), "CLUSTERDOWN")
}

// isNil reports whether v is nil or a nil pointer in an interface.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// Close closes the backend's subscription connection and stops the goroutines that serve
// it. Later StartContend calls, and the store calls of contentions still open, return an
// error wrapping simba.ErrClosed, and acquisitions waiting for their turn end at once
// (Participant.Closed); nothing is released on the store, so owner keys lapse after ttl +
// transition. Stop services before closing their backend. The client stays
// open. Close is idempotent and returns nil.
func (b *Backend) Close() error {
	b.closed.Store(true)
	b.hub.close()
	if b.renewals != nil {
		b.renewals.close()
	}
	b.participants.Close() // acquisitions waiting for their turn end now, not at their next attempt
	return nil
}

// TokenRegressions returns how many times a contention of this backend saw a fencing
// token smaller than one it had seen before for the same mutex: the sign that the
// server's clock stepped back while the token key was gone, or that data was lost in a
// way the token could not survive (see the package documentation). Each such event is
// also logged at Error level with the mutex, the token and the previous token.
func (b *Backend) TokenRegressions() uint64 { return b.regressions.Load() }

// ReleaseOwner frees mutex in the name of owner, a record read before (simba.Lookup), as
// the owner's own release does (handing the mutex to the oldest waiter), but only while
// that tenure holds it: the owner key names owner.ID and the tenure's fencing token is
// owner.Token. Otherwise (another tenure holds it, a later one of the same contender
// included, or none) it changes nothing and returns nil. It is for admin tools.
//
// Token 0 says that the reader was shown no token: the owner is a JVM contender, which
// keeps none, or a Go tenure whose token key has lapsed. It frees a tenure of owner.ID
// whose token the store does not show either, and none that shows one: the ID is all
// there is to compare, so a later tenure of the same JVM contender ID is freed too, as
// JVM Simba cannot tell its tenures apart. Bad names wrap simba.ErrInvalidArgument.
func (b *Backend) ReleaseOwner(ctx context.Context, mutex string, owner simba.Owner) error {
	return b.releaseOwner(ctx, mutex, owner, "")
}

// releaseOwner is ReleaseOwner; a Quorum passes the tenure's token as raiseTo, to raise
// the instance's token key of owner.ID to it first (see Quorum.ReleaseOwner).
func (b *Backend) releaseOwner(ctx context.Context, mutex string, owner simba.Owner, raiseTo string) error {
	if err := b.usable(ctx); err != nil {
		return err
	}
	if err := b.validateRelease(mutex, owner); err != nil || owner.ID == "" {
		return err // "": no owner
	}
	token := strconv.FormatUint(owner.Token, 10)
	if err := b.scripts.run(ctx, releaseScript, b.scriptKeys(mutex), owner.ID, string(unlisted), b.exact, raiseTo, token).Err(); err != nil {
		return b.storeError(ctx, "release in the name of "+strconv.Quote(owner.ID), err)
	}
	return nil
}

// validateRelease applies simba's rules and the Redis rules to the names of a release in
// the name of owner.
func (b *Backend) validateRelease(mutex string, owner simba.Owner) error {
	for _, err := range []error{simba.ValidateMutex(mutex), b.ValidateMutex(mutex)} {
		if err != nil {
			return err
		}
	}
	if owner.ID == "" {
		return nil
	}
	if err := simba.ValidateContenderID(owner.ID); err != nil {
		return err
	}
	return b.ValidateContenderID(owner.ID)
}

// ValidateMutex checks the Redis rules for mutex names, beyond simba.ValidateMutex: no "{"
// or "}" (the key is simba:{mutex}, and its braces must hold the whole name to keep every
// key of the mutex in one cluster slot), and at most MaxMutexLength bytes. It does no I/O;
// the error wraps simba.ErrInvalidArgument.
func (b *Backend) ValidateMutex(name string) error {
	switch {
	case len(name) > MaxMutexLength:
		return simba.InvalidArgument("mutex", name, "must be at most "+strconv.Itoa(MaxMutexLength)+" bytes for Redis")
	case strings.ContainsAny(name, "{}"):
		return simba.InvalidArgument("mutex", name, "must not contain { or } for Redis: the key is simba:{mutex}, and its braces are the cluster hash tag")
	}
	return nil
}

// ValidateContenderID checks the Redis rules for contender IDs, beyond
// simba.ValidateContenderID: no "@@" (the separator of replies and messages), no "@" at
// the end (JVM Simba would misread the reply "<id>@@<ms>"), and at most
// MaxContenderIDLength bytes. It does no I/O; the error wraps simba.ErrInvalidArgument.
func (b *Backend) ValidateContenderID(id string) error {
	switch {
	case len(id) > MaxContenderIDLength:
		return simba.InvalidArgument("contender ID", id, "must be at most "+strconv.Itoa(MaxContenderIDLength)+" bytes for Redis")
	case strings.Contains(id, separator):
		return simba.InvalidArgument("contender ID", id, "must not contain @@ for Redis: it separates the parts of replies and messages")
	case strings.HasSuffix(id, "@"):
		return simba.InvalidArgument("contender ID", id, "must not end with @ for Redis: JVM Simba would misread the reply <id>@@<ms>")
	}
	return nil
}

// KeepsValues reports that the backend keeps owner values (Participant.Value) for mutexes,
// in the token key (see the package doc, Keys and channels); see backend.ValueKeeper.
func (b *Backend) KeepsValues(k backend.Kind) bool { return k == backend.Mutex }

// StartContend opens a participant's contention; see simba.Backend. Until a call of the
// backend has succeeded, each checks that the server answers and accepts the client (a
// PING and a script), bounded by ctx, and fails with an error wrapping ErrUnreachable (an
// outage: a wrong address, the server down or still loading) or ErrRefused (a refusal: a
// wrong or missing password, a missing permission, a replica), with the client's error.
// Afterwards it does no I/O; subscriptions are made in the background (see the package
// doc, Subscriptions).
func (b *Backend) StartContend(ctx context.Context, p backend.Participant) (backend.Contention, error) {
	if err := b.usable(ctx); err != nil {
		return nil, err
	}
	if err := b.validate(p); err != nil {
		return nil, err
	}
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	return b.open(p), nil
}

// validate applies the Redis rules to a participant's names.
func (b *Backend) validate(p backend.Participant) error {
	if err := b.ValidateMutex(p.Mutex); err != nil {
		return err
	}
	if p.ContenderID != "" {
		return b.ValidateContenderID(p.ContenderID)
	}
	return nil
}

// open returns the contention of a participant whose names are valid; a retriever's
// subscribes its channels.
func (b *Backend) open(p backend.Participant) *contention {
	c := newContention(b, p)
	c.forget, _ = b.participants.Add(p.Closed) // once closed, the contention's calls fail anyway
	if c.id == "" {
		c.join()
	}
	return c
}

// usable returns an error when the backend is closed or ctx has ended.
func (b *Backend) usable(ctx context.Context) error {
	if b.closed.Load() {
		return fmt.Errorf("simba/redis: %w", simba.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("simba/redis: %w", err)
	}
	return nil
}
