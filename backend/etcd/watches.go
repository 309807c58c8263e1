package etcd

import (
	"context"
	"errors"
	"slices"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// watchStream is the state of the backend's one watch stream, which carries the watches
// of all its contentions. The backend names each watch (etcd honours a client's watch ID
// since 3.4), so a watch costs a create request and a cancel request on the stream, sent
// in a row without waiting for the server's answer, and no stream or goroutine of its
// own. Guarded by b.mu.
type watchStream struct {
	lastID  int64
	byID    map[int64]*watcher // the watches not ended yet, sent or to be sent
	creates []*watcher         // to send, each once it is due; skipped when no longer in byID
	cancels []*watcher         // to send, on the stream their create went on
	opened  uint64             // the number of the last stream opened
	current uint64             // the number of the stream open now; 0: none
	wakeAt  time.Time          // when sendTimer wakes the sender; zero: not set, or it woke it already
	// How long an owner's watch of its own key waits before its create is sent
	// (ownWatchDelay; tests change it).
	ownDelay time.Duration
}

// ownWatchDelay is how long an owner's watch of its own key waits before its create is
// sent (the package doc says what that bounds).
const ownWatchDelay = 50 * time.Millisecond

// watcher is one watch of a contention: what it waits for, from revision rev on.
type watcher struct {
	c      *contention
	t      target
	id     int64
	rev    int64
	due    time.Time // when its create may be sent; zero: at once
	stream uint64    // the number of the stream its create went on; 0: not sent yet
}

// watch starts a watch of c for t from revision rev on: the sender sends its create, at
// once, or with later after the backend's ownDelay. Called with b.mu held.
func (b *Backend) watch(c *contention, t target, rev int64, later bool) *watcher {
	ws := &b.watches
	ws.lastID++
	w := &watcher{c: c, t: t, id: ws.lastID, rev: rev}
	ws.byID[w.id] = w
	ws.creates = append(ws.creates, w)
	if !later {
		b.wakeSender()
		return w
	}
	w.due = time.Now().Add(ws.ownDelay)
	if ws.wakeAt.IsZero() || w.due.Before(ws.wakeAt) {
		b.wakeSenderAt(w.due) // no goroutine wakes before then: a shorter tenure wakes none
	}
	return w
}

// wakeSenderAt sets the sender's timer to wake it at t. Called with b.mu held.
func (b *Backend) wakeSenderAt(t time.Time) {
	b.watches.wakeAt = t
	b.sendTimer.Reset(time.Until(t))
}

// unwatch ends w: its create is not sent if it has not been yet, and its cancel is sent
// otherwise. Called with b.mu held.
func (b *Backend) unwatch(w *watcher) {
	ws := &b.watches
	if ws.byID[w.id] != w {
		return // fired, or ended already
	}
	delete(ws.byID, w.id)
	if w.stream != 0 {
		ws.cancels = append(ws.cancels, w)
		b.wakeSender()
	} else if last := len(ws.creates) - 1; last >= 0 && ws.creates[last] == w {
		ws.creates[last] = nil // the usual case, an uncontended tenure's: drop it now
		ws.creates = ws.creates[:last]
	}
}

// fire ends w, which saw events (nil: it ended otherwise, and etcd cancelled it), and
// makes its contention look again. Called with b.mu held.
func (b *Backend) fire(w *watcher, events []*mvccpb.Event) {
	if len(events) > 0 {
		b.unwatch(w) // the server keeps it otherwise
	} else {
		delete(b.watches.byID, w.id)
	}
	c := w.c
	if c.watches[w.t] == w {
		delete(c.watches, w.t)
	}
	c.gen++
	if len(events) > 0 && !w.t.puts && !w.t.prefix && w.t.key == c.view.ownerKey && c.view.self {
		c.suspend() // this contender's key is gone: it owns nothing now
	}
	c.poke() // a watch that ended otherwise (no leader, compaction) leaves belief to the lease
}

func (b *Backend) wakeSender() {
	select {
	case b.sendWake <- struct{}{}:
	default:
	}
}

// send runs from the first StartContend until Close: it sends the watches' creates, each
// once it is due, and cancels on the backend's watch stream, opening one when a create is
// due and none is open, and again, after a pause that doubles up to a second, when opening
// fails.
func (b *Backend) send() {
	var s openStream
	defer s.close()
	defer b.sendTimer.Stop()
	failures := 0
	for {
		select {
		case <-b.life.Done():
			return
		case <-b.sendWake:
		case <-b.sendTimer.C:
		}
		for {
			more, ok := b.sendQueued(&s)
			if !ok {
				failures++
				b.mu.Lock()
				b.wakeSenderAt(time.Now().Add(backoff(failures, time.Second)))
				b.mu.Unlock()
				break
			}
			failures = 0
			if !more {
				break
			}
		}
	}
}

// openStream is the watch stream the sender sends on.
type openStream struct {
	stream pb.Watch_WatchClient
	cancel context.CancelFunc
	n      uint64 // its number (watchStream.opened); 0: none open
}

func (s *openStream) close() {
	if s.cancel != nil {
		s.cancel()
	}
	*s = openStream{}
}

// sendQueued sends the requests queued on s that are due, opening it first when it is not
// open (or the receiver saw it end), and sets the sender's timer for the next create left
// queued. It reports whether it sent any (more may have come meanwhile), and false in ok
// when the stream could not be opened.
func (b *Backend) sendQueued(s *openStream) (sent, ok bool) {
	ws := &b.watches
	now := time.Now()
	b.mu.Lock()
	if s.n != ws.current {
		s.close() // it ended: its watches have fired
	}
	open := s.n == 0 && slices.ContainsFunc(ws.creates, func(w *watcher) bool { return ws.byID[w.id] == w && !w.due.After(now) })
	b.mu.Unlock()
	if open && !b.openStream(s) {
		return false, false
	}
	b.mu.Lock()
	if s.n != ws.current {
		b.mu.Unlock()
		return true, true // it ended meanwhile: the creates are sent on the next one
	}
	var reqs []*pb.WatchRequest
	var later []*watcher
	var next time.Time // when the first of later is due
	for _, w := range ws.creates {
		switch {
		case ws.byID[w.id] != w: // ended
		case w.due.After(now):
			later = append(later, w)
			if next.IsZero() || w.due.Before(next) {
				next = w.due
			}
		default:
			w.stream = s.n
			reqs = append(reqs, w.create())
		}
	}
	for _, w := range ws.cancels {
		if w.stream == s.n { // on a stream that ended, the watch ended with it
			reqs = append(reqs, &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{
				CancelRequest: &pb.WatchCancelRequest{WatchId: w.id}}})
		}
	}
	ws.creates, ws.cancels, ws.wakeAt = later, nil, time.Time{}
	if !next.IsZero() {
		b.wakeSenderAt(next)
	}
	b.mu.Unlock()
	for _, r := range reqs {
		if err := s.stream.Send(r); err != nil {
			b.log.Debug("simba/etcd: sending on the watch stream failed", "err", err)
			s.close() // the receiver sees it end, and fires its watches
			break
		}
	}
	return len(reqs) > 0, true
}

// openStream opens a watch stream, which requires a leader (the member cancels it when it
// has none), and starts its receiver.
func (b *Backend) openStream(s *openStream) bool {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(b.life))
	stream, err := b.watchers.Watch(ctx)
	if err != nil {
		cancel()
		b.log.Debug("simba/etcd: opening the watch stream failed", "err", err)
		return false
	}
	b.mu.Lock()
	b.watches.opened++
	n := b.watches.opened
	b.watches.current = n
	b.mu.Unlock()
	*s = openStream{stream: stream, cancel: cancel, n: n}
	b.wg.Go(func() { b.receive(stream, n, cancel) }) // the sender is in wg: Close's Wait has not returned
	return true
}

// receive reads watch stream n until it ends, and fires the watches whose events came, or
// which etcd cancelled (their revision was compacted, say). When the stream ends (the
// member lost its leader, the connection broke, Close), every watch sent on it fires: its
// contention looks again, and watches anew.
func (b *Backend) receive(stream pb.Watch_WatchClient, n uint64, cancel context.CancelFunc) {
	defer cancel()
	for {
		resp, err := stream.Recv()
		if err == nil && resp.WatchId == -1 && resp.Canceled {
			// A create the member refused, whose watch it does not name.
			b.log.Warn("simba/etcd: etcd refused a watch; opening the watch stream again", "reason", resp.CancelReason)
			err = errWatchRefused
		}
		b.mu.Lock()
		if err != nil {
			if b.watches.current == n {
				b.watches.current = 0
			}
			for _, w := range b.watches.byID {
				if w.stream == n {
					b.fire(w, nil)
				}
			}
			b.wakeSender() // creates queued meanwhile go on the next stream
			b.mu.Unlock()
			return
		}
		w := b.watches.byID[resp.WatchId]
		switch {
		case w == nil || w.stream != n: // ended
		case resp.Canceled:
			b.fire(w, nil)
		case w.t.fires(resp.Events):
			b.fire(w, resp.Events)
		}
		b.mu.Unlock()
	}
}

// errWatchRefused ends a watch stream on which etcd refused a create.
var errWatchRefused = errors.New("simba/etcd: etcd refused a watch")

// create is w's create request.
func (w *watcher) create() *pb.WatchRequest {
	r := &pb.WatchCreateRequest{Key: []byte(w.t.key), StartRevision: w.rev, WatchId: w.id, PrevKv: w.t.before != 0,
		Filters: []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NOPUT}}
	if w.t.puts {
		r.Filters[0] = pb.WatchCreateRequest_NODELETE
	}
	if w.t.prefix {
		r.RangeEnd = []byte(clientv3.GetPrefixRangeEnd(w.t.key))
	}
	return &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: r}}
}
