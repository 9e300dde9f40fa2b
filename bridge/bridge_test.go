package bridge

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streambridge/streambridge/internal/driver"
	"github.com/streambridge/streambridge/internal/testdrivers"
	"github.com/streambridge/streambridge/streams"
)

func newBridge(t *testing.T, d *streams.Driver) *Bridge {
	b, err := New(d)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	return b
}

func TestStreamFindsItsDeviceFromTheHandle(t *testing.T) {
	needsLearnedLayout(t)
	testdrivers.Each(t, func(t *testing.T, d *streams.Driver) {
		b := newBridge(t, d)
		n, err := d.DeviceCount()
		require.NoError(t, err)
		for i := range n {
			theirs := testdrivers.Stream(t, testdrivers.Primary(t, d, i), streams.StreamOptions{NonBlocking: true})
			s, err := b.Stream(theirs.Handle(), Options{})
			require.NoError(t, err)
			assert.Equal(t, i, s.Device().Ordinal(), "found without being told")
			assert.False(t, s.Owned())

			s, err = b.Stream(theirs.Handle(), Options{Device: OnDevice(i)})
			require.NoError(t, err, "the stated device agrees")
			if n > 1 {
				wrong := (i + 1) % n
				_, err = b.Stream(theirs.Handle(), Options{Device: OnDevice(wrong)})
				var mismatch *DeviceMismatchError
				require.True(t, errors.As(err, &mismatch), "%v", err)
				assert.Equal(t, i, mismatch.Actual)
				assert.Equal(t, wrong, mismatch.Stated)
			}
			require.NoError(t, s.Synchronize())
		}
	})
}

// A stated device the driver does not have is said to be one, not taken for a mismatch.
func TestAStatedDeviceTheDriverDoesNotHaveIsNoSuchDevice(t *testing.T) {
	needsLearnedLayout(t)
	testdrivers.Each(t, func(t *testing.T, d *streams.Driver) {
		b := newBridge(t, d)
		n, err := d.DeviceCount()
		require.NoError(t, err)
		theirs := testdrivers.Stream(t, testdrivers.Primary(t, d, 0), streams.StreamOptions{NonBlocking: true})
		for _, want := range []int{n, n + 3} {
			_, err = b.Stream(theirs.Handle(), Options{Device: OnDevice(want)})
			require.ErrorIs(t, err, streams.ErrNoSuchDevice)
			assert.Contains(t, err.Error(), fmt.Sprintf("device %d was stated for stream %#x, where the driver has %d", want, theirs.Handle(), n))
			var mismatch *DeviceMismatchError
			assert.False(t, errors.As(err, &mismatch), "%v", err)
			_, _, err = b.Identity(theirs.Handle(), Options{Device: OnDevice(want)})
			require.ErrorIs(t, err, streams.ErrNoSuchDevice)
		}
	})
}

func TestSpecialHandlesFollowTheConvention(t *testing.T) {
	testdrivers.Each(t, func(t *testing.T, d *streams.Driver) {
		b := newBridge(t, d)
		n, err := d.DeviceCount()
		require.NoError(t, err)
		last := n - 1
		tests := []struct {
			name       string
			convention Convention
			handle     uintptr
			want       uintptr
			err        error
		}{
			{"runtime 0 is the NULL stream", Runtime, 0, streams.NullStream, nil},
			{"runtime 1 is CU_STREAM_LEGACY", Runtime, 1, streams.LegacyStream, nil},
			{"runtime 2 is CU_STREAM_PER_THREAD", Runtime, 2, streams.PerThreadStream, nil},
			{"array interface 0 is refused", ArrayInterface, 0, 0, ErrAmbiguousHandle},
			{"array interface 1 is legacy", ArrayInterface, 1, streams.LegacyStream, nil},
			{"array interface 2 is per-thread", ArrayInterface, 2, streams.PerThreadStream, nil},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				// A wrapper of the per-thread stream is its OS thread's (streams.WrapStream): the
				// goroutine stays on one from the wrap to the synchronize, as the docs ask.
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				s, err := b.Stream(tc.handle, Options{Convention: tc.convention, Device: OnDevice(last)})
				if tc.err != nil {
					require.ErrorIs(t, err, tc.err)
					return
				}
				require.NoError(t, err)
				assert.Equal(t, tc.want, s.Handle())
				assert.Equal(t, last, s.Device().Ordinal(), "the stated device's default stream")
				require.NoError(t, s.Synchronize())
			})
		}
		_, err = b.Stream(0, Options{Device: OnDevice(n + 5)})
		assert.ErrorIs(t, err, streams.ErrInvalidDevice)
		_, err = b.Stream(0, Options{Convention: Convention(9)})
		assert.Error(t, err)
	})
}

func TestHostileHandlesAreErrors(t *testing.T) {
	needsLearnedLayout(t)
	testdrivers.Each(t, func(t *testing.T, d *streams.Driver) {
		b := newBridge(t, d)
		c := testdrivers.Primary(t, d, 0)
		freed, err := c.NewStream(streams.StreamOptions{})
		require.NoError(t, err)
		freedHandle := freed.Handle()
		require.NoError(t, freed.Close())
		for _, h := range []uintptr{3, 0xdeadbeef, 1 << 63, ^uintptr(0), freedHandle} {
			_, err := b.Stream(h, Options{})
			assert.ErrorIs(t, err, streams.ErrInvalidHandle, "%#x", h)
		}
	})
}

// Work on one framework's stream ordered after another's: the consumer's host function
// must not run before the producer's, however long the producer takes.
func TestOrderAcrossStreams(t *testing.T) {
	needsLearnedLayout(t)
	testdrivers.Each(t, func(t *testing.T, d *streams.Driver) {
		b := newBridge(t, d)
		c := testdrivers.Primary(t, d, 0)
		p := testdrivers.Stream(t, c, streams.StreamOptions{NonBlocking: true})
		q := testdrivers.Stream(t, c, streams.StreamOptions{NonBlocking: true})
		producer, err := b.Stream(p.Handle(), Options{})
		require.NoError(t, err)
		consumer, err := b.Stream(q.Handle(), Options{})
		require.NoError(t, err)

		var mu sync.Mutex
		var order []string
		note := func(s string) func() {
			return func() { mu.Lock(); order = append(order, s); mu.Unlock() }
		}
		gate := make(chan struct{})
		require.NoError(t, producer.LaunchHostFunc(func() { <-gate }))
		require.NoError(t, producer.LaunchHostFunc(note("produced")))
		require.NoError(t, b.Order(consumer, producer))
		require.NoError(t, consumer.LaunchHostFunc(note("consumed")))
		time.Sleep(50 * time.Millisecond)
		mu.Lock()
		assert.Empty(t, order, "the consumer ran before the producer")
		mu.Unlock()
		close(gate)
		require.NoError(t, consumer.Synchronize())
		assert.Equal(t, []string{"produced", "consumed"}, order)
	})
}

// Identity answers what Stream would, for every kind of handle, without making a stream.
func TestIdentityAgreesWithStream(t *testing.T) {
	testdrivers.Each(t, func(t *testing.T, d *streams.Driver) {
		b := newBridge(t, d)
		n, err := d.DeviceCount()
		require.NoError(t, err)
		theirs := testdrivers.Stream(t, testdrivers.Primary(t, d, n-1), streams.StreamOptions{})
		gone := testdrivers.Stream(t, testdrivers.Primary(t, d, 0), streams.StreamOptions{})
		goneHandle := gone.Handle()
		require.NoError(t, gone.Close())
		for _, tc := range []struct {
			name   string
			handle uintptr
			opts   Options
		}{
			{"stream object", theirs.Handle(), Options{}},
			{"stated rightly", theirs.Handle(), Options{Device: OnDevice(n - 1)}},
			{"stated wrongly", theirs.Handle(), Options{Device: OnDevice(n)}},
			{"legacy on the last device", 1, Options{Device: OnDevice(n - 1)}},
			{"0 under the array interface", 0, Options{Convention: ArrayInterface}},
			{"no such device", 2, Options{Device: OnDevice(n + 5)}},
			{"garbage", 0xdeadbeef, Options{}},
			{"destroyed", goneHandle, Options{}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				s, serr := b.Stream(tc.handle, tc.opts)
				dev, id, derr := b.Identity(tc.handle, tc.opts)
				if serr != nil {
					require.Error(t, derr)
					assert.Equal(t, serr.Error(), derr.Error())
					return
				}
				require.NoError(t, derr)
				assert.Equal(t, s.Device().Ordinal(), dev.Ordinal())
				if tc.handle > 2 {
					sid, err := s.ID()
					require.NoError(t, err)
					assert.Equal(t, sid, id)
				}
				require.NoError(t, s.Close())
			})
		}
	})
}

func TestDeviceChoiceZeroValueStatesNone(t *testing.T) {
	var none DeviceChoice
	_, stated := none.Ordinal()
	assert.False(t, stated, "the zero value: the device comes from the handle")
	assert.Equal(t, none, Options{}.Device)
	assert.Equal(t, none, OnDevice(-1), "-1 states none, as CuPy's device_id")
	for _, n := range []int{0, 1, 7} {
		got, stated := OnDevice(n).Ordinal()
		assert.True(t, stated)
		assert.Equal(t, n, got)
	}
}

// needsLearnedLayout skips t, saying so, where the driver's layout is not learned
// (STREAMBRIDGE_LAYOUT=unlearnable): t wraps handles that only a learned layout proves
// (streams' TestAnUnlearnableLayout checks that case).
func needsLearnedLayout(t testing.TB) {
	t.Helper()
	if never, _ := driver.Unlearnable(); never {
		t.Skip("SKIP: asserts what a learned stream layout proves; STREAMBRIDGE_LAYOUT=unlearnable here (that case: streams' TestAnUnlearnableLayout)")
	}
}
