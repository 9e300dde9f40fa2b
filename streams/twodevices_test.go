package streams

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
)

// What only a second device shows. The software driver has two devices; a machine with one
// GPU skips the real driver's half saying so, and a machine with two runs it.

// twoDevices is the primary contexts of devices 0 and 1, or a skip where there is no device 1.
func twoDevices(t *testing.T, d *Driver) (c0, c1 *Context) {
	t.Helper()
	n, err := d.DeviceCount()
	require.NoError(t, err)
	if n < 2 {
		t.Skipf("SKIP: needs two devices, this driver has %d", n)
	}
	return primary(t, d, 0), primary(t, d, 1)
}

// An event of device 0 recorded on a stream of device 1 is refused before the driver,
// naming both; a wait crosses devices.
func TestAnEventRecordedOnAnotherDevicesStreamIsRefused(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c0, c1 := twoDevices(t, d)
		e := newEvent(t, c0, EventOptions{})
		s0, s1 := newStream(t, c0, StreamOptions{}), newStream(t, c1, StreamOptions{})
		for _, record := range []func() error{func() error { return s1.Record(e) }, func() error { return e.Record(s1) }} {
			err := record()
			require.ErrorIs(t, err, ErrWrongDevice)
			assert.Contains(t, err.Error(), "an event of device 0 recorded on a stream of device 1")
		}
		require.NoError(t, s0.Record(e))
		require.NoError(t, s1.WaitEvent(e))
		require.NoError(t, s1.Synchronize())
	})
}

// From eight goroutines at once, each orders its stream of device 0 after slow work on a
// stream of device 1 (a host function that sleeps), through WaitStream: device 0's later
// work runs only once device 1's has.
func TestWorkOnOneDeviceWaitsForSlowWorkOnTheOther(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c0, c1 := twoDevices(t, d)
		const goroutines = 8
		var slow, fast [goroutines]*Stream
		for g := range goroutines {
			slow[g] = newStream(t, c1, StreamOptions{NonBlocking: true})
			fast[g] = newStream(t, c0, StreamOptions{NonBlocking: true})
		}
		var afterSlow [goroutines]atomic.Bool
		var waiting [goroutines]bool
		var group errgroup.Group
		for g := range goroutines {
			group.Go(func() error {
				var slowDone atomic.Bool
				err := errors.Join(
					slow[g].LaunchHostFunc(func() { time.Sleep(200 * time.Millisecond); slowDone.Store(true) }),
					fast[g].WaitStream(slow[g]),
					fast[g].LaunchHostFunc(func() { afterSlow[g].Store(slowDone.Load()) }),
				)
				if err == nil {
					waiting[g], err = fast[g].Query() // device 0's work waits for device 1's
					waiting[g] = !waiting[g]
				}
				return errors.Join(err, fast[g].Synchronize())
			})
		}
		require.NoError(t, group.Wait())
		for g := range goroutines {
			assert.True(t, waiting[g], "goroutine %d: device 0's stream was not waiting for device 1's", g)
			assert.True(t, afterSlow[g].Load(), "goroutine %d: device 0's work ran before device 1's", g)
		}
	})
}
