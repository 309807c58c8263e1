package batch_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/batch"
)

var errClosed = errors.New("closed")

// queued is a call of the queue tests: done gets the error it fails with, or nil once sent.
type queued struct {
	call
	done chan error
}

func newQueued(ctx context.Context) *queued {
	return &queued{call: call{ctx: ctx, sendBy: time.Now()}, done: make(chan error, 1)}
}

// queue returns a queue of up to max calls a batch, closed at the test's end, that hands
// each batch to send.
func queue(t *testing.T, max, inFlight int, send func(ctx context.Context, batch []*queued)) *batch.Queue[*queued] {
	q := batch.NewQueue(batch.Options[*queued]{
		Gap: time.Millisecond, Max: max, InFlight: inFlight, Send: send, Closed: errClosed,
		Fail: func(c *queued, err error) { c.done <- err },
	})
	t.Cleanup(q.Close)
	return q
}

// wait returns what c's done gets, failing the test if nothing comes.
func wait(t *testing.T, c *queued) error {
	t.Helper()
	select {
	case err := <-c.done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("a call got no outcome")
		return nil
	}
}

func TestQueueAddAfterCloseAnswersClosed(t *testing.T) {
	q := queue(t, 10, 0, func(context.Context, []*queued) { t.Error("a batch was sent") })
	q.Close()
	if err := q.Add(newQueued(t.Context())); !errors.Is(err, errClosed) {
		t.Errorf("Add after Close: %v, want %v", err, errClosed)
	}
}

// TestQueueCloseJoinsSendsAndFailsTheWaiting: Close ends the context of the sends in
// flight and returns once they have returned; the calls that had not gone, those waiting
// for a send's turn among them, fail with the Closed error.
func TestQueueCloseJoinsSendsAndFailsTheWaiting(t *testing.T) {
	started, returned := make(chan struct{}), make(chan struct{})
	q := queue(t, 1, 1, func(ctx context.Context, batch []*queued) {
		close(started)
		<-ctx.Done() // in flight until Close
		close(returned)
	})
	flying, waiting := newQueued(t.Context()), newQueued(t.Context())
	if err := q.Add(flying); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the first batch was not sent")
	}
	if err := q.Add(waiting); err != nil {
		t.Fatal(err)
	}
	q.Close()
	select {
	case <-returned:
	default:
		t.Error("Close returned before the send in flight")
	}
	if err := wait(t, waiting); !errors.Is(err, errClosed) {
		t.Errorf("a call left at Close: %v, want %v", err, errClosed)
	}
	if !q.Closing() {
		t.Error("Closing after Close: false")
	}
}

// TestQueueSendsTheMostUrgentFirst: the calls that wait while a batch is sent go in the
// order of their deadlines (Take), and the send's context ends at the batch's deadline.
func TestQueueSendsTheMostUrgentFirst(t *testing.T) {
	release := make(chan struct{})
	sent := make(chan []*queued, 4)
	q := queue(t, 1, 0, func(ctx context.Context, batch []*queued) {
		if len(sent) == 0 {
			<-release // the first batch holds the others up
		}
		d, ok := ctx.Deadline()
		if bd, _ := batch[0].ctx.Deadline(); !ok || !d.Equal(bd) {
			t.Errorf("a batch sent by %v (%v), want its deadline %v", d, ok, bd)
		}
		sent <- batch
	})
	at := func(d time.Duration) context.Context {
		ctx, cancel := context.WithTimeout(t.Context(), d)
		t.Cleanup(cancel)
		return ctx
	}
	first, late, urgent := newQueued(at(time.Minute)), newQueued(at(2*time.Minute)), newQueued(at(time.Minute))
	if err := q.Add(first); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*queued{late, urgent} {
		if err := q.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	for _, want := range []*queued{first, urgent, late} {
		select {
		case got := <-sent:
			if len(got) != 1 || got[0] != want {
				t.Fatalf("sent %v, want the call due at %v", got, want.ctx)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a batch was not sent")
		}
	}
}
