package streams

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streambridge/streambridge/internal/driver"
)

func TestStreamCreateOptions(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		least, greatest, err := c.StreamPriorityRange()
		require.NoError(t, err)
		require.LessOrEqual(t, greatest, least)

		tests := []struct {
			name         string
			opts         StreamOptions
			wantPriority int
		}{
			{"default", StreamOptions{}, 0},
			{"non-blocking", StreamOptions{NonBlocking: true}, 0},
			{"greatest priority", StreamOptions{Priority: greatest}, greatest},
			{"least priority", StreamOptions{Priority: least}, least},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				s := newStream(t, c, tc.opts)
				assert.True(t, s.Owned())
				assert.NotZero(t, s.Handle())
				nb, err := s.NonBlocking()
				require.NoError(t, err)
				assert.Equal(t, tc.opts.NonBlocking, nb)
				p, err := s.Priority()
				require.NoError(t, err)
				assert.Equal(t, tc.wantPriority, p)
				assert.Equal(t, c.Handle(), s.Context().Handle())
			})
		}
		for _, p := range []int{greatest - 1, least + 1} {
			_, err := c.NewStream(StreamOptions{Priority: p})
			require.ErrorIs(t, err, ErrPriority, "the driver would clamp %d silently", p)
			assert.ErrorContains(t, err, fmt.Sprintf("%d is outside device 0's range, %d (the highest) to %d (the lowest)",
				p, greatest, least))
		}
	})
}

func TestStreamIDsAreUnique(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		seen := map[uint64]bool{}
		for range 10 {
			s, err := c.NewStream(StreamOptions{})
			require.NoError(t, err)
			id, err := s.ID()
			require.NoError(t, err)
			assert.False(t, seen[id], "stream id %d reused", id)
			seen[id] = true
			require.NoError(t, s.Close())
		}
	})
}

// foreignStream makes a stream the way another library would, behind this package's back.
func foreignStream(t testing.TB, c *Context, flags uint32) uintptr {
	t.Helper()
	h, r := c.api.StreamCreateWithPriority(c.handle, flags, 0)
	require.NoError(t, c.drv.check("cuStreamCreateWithPriority", r))
	t.Cleanup(func() {
		// a capture a failed test left going on ends here: a global one would refuse the
		// calls of every test after it (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
		if st, _, r := c.api.StreamGetCaptureInfo(c.handle, h); r == driver.Success && st != driver.CaptureStatusNone {
			if g, r := c.api.StreamEndCapture(h); r == driver.Success {
				c.api.GraphDestroy(g)
			}
		}
		require.NoError(t, c.drv.check("cuStreamDestroy", c.api.StreamDestroy(h)))
	})
	return uintptr(h)
}

func TestWrapForeignStream(t *testing.T) {
	needsLearnedLayout(t)
	eachDriver(t, func(t *testing.T, d *Driver) {
		n, err := d.DeviceCount()
		require.NoError(t, err)
		last := primary(t, d, n-1)
		h := foreignStream(t, last, driver.StreamNonBlocking)

		s, err := d.WrapStream(h)
		require.NoError(t, err)
		assert.False(t, s.Owned())
		assert.Equal(t, n-1, s.Device().Ordinal(), "device found from the handle")
		assert.Equal(t, last.Handle(), s.Context().Handle())
		nb, err := s.NonBlocking()
		require.NoError(t, err)
		assert.True(t, nb)

		var j journal
		require.NoError(t, s.LaunchHostFunc(j.add("ran")))
		require.NoError(t, s.Synchronize())
		assert.Equal(t, []string{"ran"}, j.get())

		require.NoError(t, s.Close())
		_, err = s.Query()
		assert.ErrorIs(t, err, ErrClosed)
		// Closing the borrowed wrapper left the stream alive for its owner.
		assert.Equal(t, driver.Success, d.api.StreamQuery(0, driver.Stream(h)))

		assert.Equal(t, h, wrapStream(t, last, h).Handle())
	})
}

func TestWrapStreamWrongContext(t *testing.T) {
	needsLearnedLayout(t)
	eachDriver(t, func(t *testing.T, d *Driver) {
		n, err := d.DeviceCount()
		require.NoError(t, err)
		if n < 2 {
			t.Skipf("SKIP: needs two devices, this driver has %d", n)
		}
		c0, c1 := primary(t, d, 0), primary(t, d, 1)
		h := foreignStream(t, c1, 0)
		_, err = c0.WrapStream(h)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "belongs to context")
	})
}

func TestWrapSpecialHandles(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		// A wrapper of the per-thread stream is its OS thread's: the goroutine stays on one
		// from the wrap to the last use, as WrapStream asks.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		c := primary(t, d, 0)
		for _, h := range []uintptr{NullStream, LegacyStream, PerThreadStream} {
			_, err := d.WrapStream(h)
			require.Error(t, err, "handle %d names no context by itself", h)

			s, err := c.WrapStream(h)
			require.NoError(t, err)
			assert.False(t, s.Owned())
			assert.Equal(t, h, s.Handle())
			e := newEvent(t, c, EventOptions{})
			require.NoError(t, s.Record(e))
			require.NoError(t, s.WaitEvent(e))
			var j journal
			require.NoError(t, s.LaunchHostFunc(j.add("ran")))
			require.NoError(t, s.Synchronize())
			done, err := s.Query()
			require.NoError(t, err)
			assert.True(t, done)
			assert.Equal(t, []string{"ran"}, j.get())
			_, err = s.ID()
			require.NoError(t, err)
			require.NoError(t, s.Close())
		}
	})
}

func TestStreamQueryNotReadyIsNotAnError(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		s := newStream(t, c, StreamOptions{})
		g := blockStream(t, s)
		done, err := s.Query()
		require.NoError(t, err)
		assert.False(t, done)
		g.open()
		require.NoError(t, s.Synchronize())
		done, err = s.Query()
		require.NoError(t, err)
		assert.True(t, done)
	})
}

func TestWaitStreamOrdersWork(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		producer := newStream(t, c, StreamOptions{NonBlocking: true})
		consumer := newStream(t, c, StreamOptions{NonBlocking: true})
		var j journal
		g := blockStream(t, producer)
		require.NoError(t, producer.LaunchHostFunc(j.add("produce")))
		require.NoError(t, consumer.WaitStream(producer))
		require.NoError(t, consumer.LaunchHostFunc(j.add("consume")))
		settle()
		assert.Empty(t, j.get(), "consumer ran before producer")
		g.open()
		require.NoError(t, consumer.Synchronize())
		assert.Equal(t, []string{"produce", "consume"}, j.get())
	})
}

// A borrowed wrapper closed right after WaitStream takes its fence event with it; the
// wait already enqueued must hold (Python drops such wrappers as soon as the call returns).
func TestWaitStreamHoldsAfterTheProducerWrapperCloses(t *testing.T) {
	needsLearnedLayout(t)
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		producer := newStream(t, c, StreamOptions{NonBlocking: true})
		consumer := newStream(t, c, StreamOptions{NonBlocking: true})
		slowWork(t, producer, 300*time.Millisecond)
		wrapper, err := d.WrapStream(producer.Handle())
		require.NoError(t, err)
		require.NoError(t, consumer.WaitStream(wrapper))
		require.NoError(t, wrapper.Close())
		marker := newEvent(t, c, EventOptions{DisableTiming: true})
		require.NoError(t, consumer.Record(marker))
		done, err := marker.Query()
		require.NoError(t, err)
		assert.False(t, done, "the consumer must wait for the producer's slow work")
		require.NoError(t, marker.Synchronize())
		done, err = producer.Query()
		require.NoError(t, err)
		assert.True(t, done, "the producer finished first")
	})
}

func TestLegacyStreamSynchronizesWithBlockingStreams(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		blocking := newStream(t, c, StreamOptions{})
		nonBlocking := newStream(t, c, StreamOptions{NonBlocking: true})
		legacy := wrapStream(t, c, LegacyStream)
		blockingDone := newEvent(t, c, EventOptions{})
		legacyDone := newEvent(t, c, EventOptions{})
		nonBlockingDone := newEvent(t, c, EventOptions{})

		slowWork(t, blocking, 300*time.Millisecond)
		require.NoError(t, blocking.Record(blockingDone))
		require.NoError(t, legacy.Record(legacyDone))
		require.NoError(t, nonBlocking.Record(nonBlockingDone))

		require.NoError(t, nonBlockingDone.Synchronize(), "a non-blocking stream does not wait")
		done, err := legacyDone.Query()
		require.NoError(t, err)
		assert.False(t, done, "legacy work must wait for the blocking stream")
		require.NoError(t, legacyDone.Synchronize())
		done, err = blockingDone.Query()
		require.NoError(t, err)
		assert.True(t, done)
	})
}

func TestClosedObjectsReturnErrClosed(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		s, err := c.NewStream(StreamOptions{})
		require.NoError(t, err)
		e, err := c.NewEvent(EventOptions{})
		require.NoError(t, err)
		require.NoError(t, s.Close())
		require.NoError(t, s.Close())
		require.NoError(t, e.Close())
		require.NoError(t, e.Close())

		live := newStream(t, c, StreamOptions{})
		liveEvent := newEvent(t, c, EventOptions{})
		checks := map[string]error{
			"query":      func() error { _, err := s.Query(); return err }(),
			"sync":       s.Synchronize(),
			"record":     s.Record(liveEvent),
			"record-ev":  live.Record(e),
			"wait-ev":    live.WaitEvent(e),
			"hostfunc":   s.LaunchHostFunc(func() {}),
			"capture":    s.BeginCapture(CaptureGlobal),
			"event-sync": e.Synchronize(),
		}
		for name, err := range checks {
			assert.ErrorIs(t, err, ErrClosed, name)
		}
	})
}

func TestBadHandlesFromTheSoftwareDriverAreErrors(t *testing.T) {
	needsLearnedLayout(t)
	d := Sim()
	c := primary(t, d, 0)
	s, err := c.NewStream(StreamOptions{})
	require.NoError(t, err)
	h := s.Handle()
	require.NoError(t, s.Close())
	_, err = d.WrapStream(h)
	assert.True(t, errors.Is(err, ErrInvalidHandle), "destroyed handle: %v", err)
	_, err = d.WrapStream(0xdeadbeef)
	assert.True(t, errors.Is(err, ErrInvalidHandle), "garbage handle: %v", err)
}

func TestStreamSynchronizeWaitsForWork(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		s := newStream(t, c, StreamOptions{})
		var j journal
		require.NoError(t, s.LaunchHostFunc(func() { time.Sleep(30 * time.Millisecond) }))
		require.NoError(t, s.LaunchHostFunc(j.add("after sleep")))
		require.NoError(t, s.Synchronize())
		assert.Equal(t, []string{"after sleep"}, j.get())
	})
}

// WaitStream between a stream object and a context's default stream, in both directions:
// the special handle must resolve in its own context whatever the caller's thread has.
func TestWaitStreamWithDefaultStream(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		s := newStream(t, c, StreamOptions{NonBlocking: true})
		legacy := wrapStream(t, c, LegacyStream)
		done := newEvent(t, c, EventOptions{})

		slowWork(t, s, 200*time.Millisecond)
		require.NoError(t, legacy.WaitStream(s))
		require.NoError(t, legacy.Record(done))
		ready, err := done.Query()
		require.NoError(t, err)
		assert.False(t, ready, "the default stream waits for s")
		require.NoError(t, done.Synchronize())

		slowWork(t, legacy, 200*time.Millisecond)
		require.NoError(t, s.WaitStream(legacy))
		require.NoError(t, s.Record(done))
		ready, err = done.Query()
		require.NoError(t, err)
		assert.False(t, ready, "s waits for the default stream")
		require.NoError(t, s.Synchronize())
	})
}

// The context and identity the check reads from a stream object are the ones the driver
// reports.
func TestStreamCheckFindsTheDriversContextAndIdentity(t *testing.T) {
	needsLearnedLayout(t)
	eachDriver(t, func(t *testing.T, d *Driver) {
		n, err := d.DeviceCount()
		require.NoError(t, err)
		for dev := range n {
			c := primary(t, d, dev)
			s := newStream(t, c, StreamOptions{NonBlocking: true})
			got, gotID, r := d.api.StreamCheck(driver.Stream(s.Handle()))
			require.Equal(t, driver.Success, r)
			want, r := d.api.StreamGetCtx(driver.Stream(s.Handle()))
			require.Equal(t, driver.Success, r)
			assert.Equal(t, want, got, "device %d", dev)
			wantID, r := d.api.StreamGetId(driver.Stream(s.Handle()))
			require.Equal(t, driver.Success, r)
			assert.Equal(t, wantID, gotID, "device %d", dev)
			w, err := d.WrapStream(s.Handle())
			require.NoError(t, err)
			assert.Equal(t, dev, w.Device().Ordinal())
		}
	})
}

// A borrowed stream is its identity, not its address: once its stream is destroyed, every
// use fails with ErrInvalidHandle before the driver sees the handle, also when the address
// now belongs to a new stream (the software driver hands a freed address to the next
// object, as an allocator does; on the real driver the test makes streams until one comes
// back at the address, and a handle nobody reused must be refused all the same).
func TestBorrowedStreamIsRefusedAfterItsAddressIsReused(t *testing.T) {
	needsLearnedLayout(t)
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		other := newStream(t, c, StreamOptions{NonBlocking: true})
		e := newEvent(t, c, EventOptions{DisableTiming: true})
		theirs, err := c.NewStream(StreamOptions{NonBlocking: true})
		require.NoError(t, err)
		borrowed, err := d.WrapStream(theirs.Handle())
		require.NoError(t, err)
		defer borrowed.Close()
		require.NoError(t, borrowed.Record(e), "live: usable")
		require.NoError(t, theirs.Close())
		reused := false
		for range 1000 {
			s := newStream(t, c, StreamOptions{NonBlocking: true})
			if s.Handle() == borrowed.Handle() {
				reused = true
				break
			}
		}
		t.Logf("address reused by a new stream: %v", reused)
		if d.Name() == "sim" {
			require.True(t, reused, "the software driver reuses a freed address at once")
		}
		calls := map[string]func() error{
			"Query":           func() error { _, err := borrowed.Query(); return err },
			"Synchronize":     borrowed.Synchronize,
			"Record":          func() error { return borrowed.Record(e) },
			"WaitEvent":       func() error { return borrowed.WaitEvent(e) },
			"WaitStream":      func() error { return borrowed.WaitStream(other) },
			"waited on":       func() error { return other.WaitStream(borrowed) },
			"LaunchHostFunc":  func() error { return borrowed.LaunchHostFunc(func() {}) },
			"BeginCapture":    func() error { return borrowed.BeginCapture(CaptureRelaxed) },
			"Priority":        func() error { _, err := borrowed.Priority(); return err },
			"ID":              func() error { _, err := borrowed.ID(); return err },
			"IsCapturing":     func() error { _, err := borrowed.IsCapturing(); return err },
			"Fence":           func() error { _, err := borrowed.Fence(); return err },
			"VerifyStream":    func() error { return d.VerifyStream(borrowed.Handle(), borrowed.id) },
			"wrap, then used": func() error { w, err := d.WrapStream(borrowed.Handle()); _ = w; return err },
		}
		for name, call := range calls {
			err := call()
			if name == "wrap, then used" && reused {
				assert.NoError(t, err, "a new wrap of a live stream's address is that stream")
				continue
			}
			assert.ErrorIs(t, err, ErrInvalidHandle, name)
			if name != "wrap, then used" {
				assert.ErrorContains(t, err, "was destroyed", name)
			}
		}
	})
}
