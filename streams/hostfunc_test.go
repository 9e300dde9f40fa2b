package streams

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// capturePanics routes host-function panics to the returned func for the test's length.
func capturePanics(t *testing.T) func() []error {
	var mu sync.Mutex
	var got []error
	SetHostFuncPanicHandler(func(err error) {
		mu.Lock()
		got = append(got, err)
		mu.Unlock()
	})
	t.Cleanup(func() { SetHostFuncPanicHandler(nil) })
	return func() []error {
		mu.Lock()
		defer mu.Unlock()
		return append([]error(nil), got...)
	}
}

func TestHostFuncPanicIsReportedAndStreamGoesOn(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		panics := capturePanics(t)
		c := primary(t, d, 0)
		s := newStream(t, c, StreamOptions{})
		var j journal
		require.NoError(t, s.LaunchHostFunc(func() { panic("boom") }))
		require.NoError(t, s.LaunchHostFunc(j.add("after the panic")))
		require.NoError(t, s.Synchronize())
		assert.Equal(t, []string{"after the panic"}, j.get())
		got := panics()
		require.Len(t, got, 1)
		var p *HostFuncPanic
		require.True(t, errors.As(got[0], &p))
		assert.Equal(t, "boom", p.Value)
		assert.NotEmpty(t, p.Stack)
	})
}

func TestHostFuncRunsInStreamOrder(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		s := newStream(t, c, StreamOptions{})
		var j journal
		for _, name := range []string{"a", "b", "c", "d"} {
			require.NoError(t, s.LaunchHostFunc(j.add(name)))
		}
		require.NoError(t, s.Synchronize())
		assert.Equal(t, []string{"a", "b", "c", "d"}, j.get())
	})
}

func TestHostFuncNil(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		s := newStream(t, primary(t, d, 0), StreamOptions{})
		require.Error(t, s.LaunchHostFunc(nil))
	})
}

// A million host functions: far more than purego's callback slots, so this shows the one
// trampoline and the handle table at work, and that the table does not grow.
func TestMillionHostFuncs(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		s := newStream(t, c, StreamOptions{NonBlocking: true})
		before := LiveHostFuncs()
		var count atomic.Int64
		fn := func() { count.Add(1) }
		const batch = 10_000
		for i := 0; i < n; i += batch {
			for range batch {
				if err := s.LaunchHostFunc(fn); err != nil {
					require.NoError(t, err)
				}
			}
			require.NoError(t, s.Synchronize())
		}
		assert.Equal(t, int64(n), count.Load())
		assert.Equal(t, before, LiveHostFuncs(), "every one-shot entry was freed")
	})
}

// A host function that synchronizes a stream (its own, or another with a host function
// queued behind this one) would wait forever for the driver's one host-function thread; it
// gets ErrInHostFunc instead, and the streams go on.
func TestBlockingCallsFromAHostFunctionFail(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		s := newStream(t, c, StreamOptions{NonBlocking: true})
		other := newStream(t, c, StreamOptions{NonBlocking: true})
		e := newEvent(t, c, EventOptions{DisableTiming: true})
		got := make(chan []error, 1)
		require.NoError(t, s.LaunchHostFunc(func() {
			got <- []error{s.Synchronize(), other.Synchronize(), e.Synchronize()}
		}))
		require.NoError(t, other.WaitStream(s)) // other's host function waits for the one above
		ran := make(chan struct{})
		require.NoError(t, other.LaunchHostFunc(func() { close(ran) }))
		require.NoError(t, other.Record(e))
		select {
		case errs := <-got:
			for i, err := range errs {
				assert.ErrorIs(t, err, ErrInHostFunc, "call %d", i)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a blocking call inside a host function hung")
		}
		require.NoError(t, other.Synchronize(), "outside a host function it works")
		<-ran
	})
}
