package simba_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/memory"
)

// countingBackend fails the test if anything reaches it: validation must come first.
type countingBackend struct{ calls int }

func (b *countingBackend) StartContend(context.Context, backend.Participant) (backend.Contention, error) {
	b.calls++
	return nil, errors.New("must not be called")
}

// Every bad input of the core is rejected with an *ArgumentError that wraps
// ErrInvalidArgument and names the field, before any I/O and without goroutines.
func TestBadInputIsRejectedBeforeIO(t *testing.T) {
	b := &countingBackend{}
	work := func(context.Context, simba.Owner) {}
	contender := func(mutex, id string) simba.Contender {
		return simba.ContenderFuncs{MutexName: mutex, ID: id}
	}
	var nilContender *simba.ContenderFuncs
	var nilBackend *memory.Backend
	cases := []struct {
		name  string
		field string
		make  func() error
	}{
		{"empty mutex", "mutex", func() error { _, err := simba.NewService(b, contender("", "c")); return err }},
		{"blank mutex", "mutex", func() error { _, err := simba.NewService(b, contender(" \t", "c")); return err }},
		{"leading space", "mutex", func() error { _, err := simba.NewService(b, contender(" m", "c")); return err }},
		{"trailing space", "mutex", func() error { _, err := simba.NewLocker(b, "m "); return err }},
		{"NUL in mutex", "mutex", func() error { _, err := simba.NewLocker(b, "a\x00b"); return err }},
		{"control character", "mutex", func() error { _, err := simba.NewLocker(b, "a\nb"); return err }},
		{"invalid UTF-8", "mutex", func() error { _, err := simba.NewLocker(b, "a\xffb"); return err }},
		{"empty contender ID", "contender ID", func() error { _, err := simba.NewService(b, contender("m", "")); return err }},
		{"control in contender ID", "contender ID", func() error { _, err := simba.NewService(b, contender("m", "c\x01")); return err }},
		{"contender ID option", "contender ID", func() error {
			_, err := simba.NewLocker(b, "m", simba.WithContenderID(" "))
			return err
		}},
		{"zero ttl", "ttl", func() error { _, err := simba.NewLocker(b, "m", simba.WithTTL(0)); return err }},
		{"negative ttl", "ttl", func() error { _, err := simba.NewLocker(b, "m", simba.WithTTL(-time.Second)); return err }},
		{"sub-millisecond ttl", "ttl", func() error { _, err := simba.NewLocker(b, "m", simba.WithTTL(500*time.Microsecond)); return err }},
		{"fractional ms ttl", "ttl", func() error { _, err := simba.NewLocker(b, "m", simba.WithTTL(1500*time.Microsecond)); return err }},
		{"negative transition", "transition", func() error {
			_, err := simba.NewLocker(b, "m", simba.WithTransition(-time.Millisecond))
			return err
		}},
		{"fractional ms transition", "transition", func() error {
			_, err := simba.NewLocker(b, "m", simba.WithTransition(time.Microsecond))
			return err
		}},
		{"ttl + transition too long", "ttl + transition", func() error {
			_, err := simba.NewLocker(b, "m", simba.WithTTL(1<<62/time.Millisecond*time.Millisecond), simba.WithTransition(1<<62/time.Millisecond*time.Millisecond))
			return err
		}},
		{"zero call timeout", "call timeout", func() error {
			_, err := simba.NewLocker(b, "m", simba.WithCallTimeout(0))
			return err
		}},
		{"call timeout not below ttl", "call timeout", func() error {
			_, err := simba.NewLocker(b, "m", simba.WithTTL(time.Second), simba.WithCallTimeout(time.Second))
			return err
		}},
		{"renewal lead within drift margin", "renewal lead", func() error {
			_, err := simba.NewLocker(b, "m", simba.WithTTL(time.Second), simba.WithRenewalLead(10*time.Millisecond))
			return err
		}},
		{"renewal lead not below ttl", "renewal lead", func() error {
			_, err := simba.NewLocker(b, "m", simba.WithTTL(time.Second), simba.WithRenewalLead(time.Second))
			return err
		}},
		{"negative initial delay", "initial delay", func() error {
			_, err := simba.NewService(b, contender("m", "c"), simba.WithInitialDelay(-time.Second))
			return err
		}},
		{"nil logger", "logger", func() error { _, err := simba.NewLocker(b, "m", simba.WithLogger(nil)); return err }},
		{"nil backend", "backend", func() error { _, err := simba.NewLocker(nil, "m"); return err }},
		{"typed nil backend", "backend", func() error { _, err := simba.NewLocker(nilBackend, "m"); return err }},
		{"nil contender", "contender", func() error { _, err := simba.NewService(b, nil); return err }},
		{"typed nil contender", "contender", func() error { _, err := simba.NewService(b, nilContender); return err }},
		{"nil retriever", "retriever", func() error { _, err := simba.NewRetrievalService(b, nil); return err }},
		{"retriever with blank mutex", "mutex", func() error {
			_, err := simba.NewRetrievalService(b, simba.RetrieverFunc{MutexName: ""})
			return err
		}},
		{"scheduler period zero", "schedule period", func() error {
			_, err := simba.NewScheduler(b, "m", simba.Schedule{}, work)
			return err
		}},
		{"scheduler negative period", "schedule period", func() error {
			_, err := simba.NewScheduler(b, "m", simba.Schedule{Period: -time.Second}, work)
			return err
		}},
		{"scheduler negative initial delay", "schedule initial delay", func() error {
			_, err := simba.NewScheduler(b, "m", simba.Schedule{Period: time.Second, InitialDelay: -1}, work)
			return err
		}},
		{"scheduler nil work", "work", func() error {
			_, err := simba.NewScheduler(b, "m", simba.Schedule{Period: time.Second}, nil)
			return err
		}},
		{"owner value too long", "owner value", func() error {
			_, err := simba.NewLocker(b, "m", simba.WithOwnerValue(strings.Repeat("v", 1025)))
			return err
		}},
		{"owner value with a control character", "owner value", func() error {
			_, err := simba.NewService(b, contender("m", "c"), simba.WithOwnerValue("a\nb"))
			return err
		}},
		{"owner value not UTF-8", "owner value", func() error {
			_, err := simba.NewScheduler(b, "m", simba.Schedule{Period: time.Second}, work, simba.WithOwnerValue("a\xffb"))
			return err
		}},
		{"owner value for a backend that keeps none", "owner value", func() error {
			_, err := simba.NewLocker(b, "m", simba.WithOwnerValue("10.0.0.7:8080"))
			return err
		}},
		{"owner value for a semaphore of a backend that keeps none for one", "owner value", func() error {
			mem, err := memory.New(memory.NewStore())
			if err != nil {
				return err
			}
			_, err = simba.NewSemaphore(mem, "s", 2, simba.WithOwnerValue("10.0.0.7:8080"))
			return err
		}},
		{"scheduler blank mutex", "mutex", func() error {
			_, err := simba.NewScheduler(b, " ", simba.Schedule{Period: time.Second}, work)
			return err
		}},
	}
	before := goleak.IgnoreCurrent()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = c.make() })
			require.ErrorIs(t, err, simba.ErrInvalidArgument)
			var ae *simba.ArgumentError
			require.ErrorAs(t, err, &ae)
			assert.Equal(t, c.field, ae.Field)
			assert.True(t, strings.HasPrefix(err.Error(), "simba: "+c.field+" "), "message %q names the field", err)
		})
	}
	assert.Zero(t, b.calls, "validation must come before any I/O")
	assert.NoError(t, goleak.Find(before), "rejected input must not start goroutines")
}

func TestArgumentErrorMessage(t *testing.T) {
	_, err := simba.NewLocker(&countingBackend{}, "m", simba.WithTTL(-time.Second))
	assert.EqualError(t, err, "simba: ttl -1s: must be > 0")
}

// Lifecycle and context inputs of a constructed service.
func TestNilContextsAreRejected(t *testing.T) {
	b, err := memory.New(memory.NewStore())
	require.NoError(t, err)
	svc, err := simba.NewService(b, simba.ContenderFuncs{MutexName: "m", ID: "c"})
	require.NoError(t, err)
	var nilCtx context.Context
	assert.ErrorIs(t, svc.Start(nilCtx), simba.ErrInvalidArgument)
	assert.ErrorIs(t, svc.Stop(nilCtx), simba.ErrInvalidArgument)
	l, err := simba.NewLocker(b, "m")
	require.NoError(t, err)
	_, err = l.Acquire(nilCtx)
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)
	_, err = l.TryAcquire(nilCtx)
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)
	lease, err := l.Acquire(t.Context())
	require.NoError(t, err)
	assert.ErrorIs(t, lease.Release(nilCtx), simba.ErrInvalidArgument)
	require.NoError(t, lease.Release(t.Context()))
}

// A backend's Validator is consulted before any I/O.
func TestBackendValidatorIsConsulted(t *testing.T) {
	v := &limitingBackend{}
	_, err := simba.NewLocker(v, strings.Repeat("x", 11))
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)
	_, err = simba.NewLocker(v, "ok", simba.WithContenderID("id-with-@@"))
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)
	_, err = simba.NewRetrievalService(v, simba.RetrieverFunc{MutexName: strings.Repeat("x", 11)})
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)
	_, err = simba.NewLocker(v, "ok")
	assert.NoError(t, err)
	assert.Zero(t, v.calls)
}

type limitingBackend struct{ countingBackend }

func (limitingBackend) ValidateMutex(name string) error {
	if len(name) > 10 {
		return simba.InvalidArgument("mutex", name, "must be at most 10 bytes")
	}
	return nil
}

func (limitingBackend) ValidateContenderID(id string) error {
	if strings.Contains(id, "@@") {
		return simba.InvalidArgument("contender ID", id, `must not contain "@@"`)
	}
	return nil
}

// An owner value at the size bound, of any printable text, is kept; the value of a
// backend that keeps none is refused with a message that says so.
func TestOwnerValueBounds(t *testing.T) {
	b, err := memory.New(memory.NewStore())
	require.NoError(t, err)
	_, err = simba.NewLocker(b, "m", simba.WithOwnerValue(strings.Repeat("é", 512)))
	assert.NoError(t, err, "1 KiB of UTF-8")
	_, err = simba.NewLocker(b, "m", simba.WithOwnerValue(""))
	assert.NoError(t, err, "no value")
	_, err = simba.NewLocker(&countingBackend{}, "m", simba.WithOwnerValue("v1"))
	assert.EqualError(t, err, `simba: owner value "v1": the backend (*simba_test.countingBackend) keeps none for a mutex`)
}
