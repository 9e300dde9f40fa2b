package streams

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streambridge/streambridge/internal/driver"
	"github.com/streambridge/streambridge/internal/sim"
)

// Streams of contexts other than a device's primary one (issue 26): a green context's
// streams work wherever a primary context's do; a stream of a context of its own is refused,
// saying what it is.

// greenStream makes a green context of all of device 0's SMs and a stream of it, both
// destroyed at the test's end; it skips, saying why, where the driver has no green
// contexts.
func greenStream(t *testing.T, d *Driver) (driver.GreenContext, driver.Stream) {
	t.Helper()
	dev, r := d.api.DeviceGet(0)
	require.Equal(t, driver.Success, r)
	g, r := d.api.GreenCtxCreate(dev)
	if r == driver.ErrorNotSupported {
		t.Skipf("SKIP: the %s driver or its device 0 has no green contexts: %v", d.Name(), r)
	}
	require.Equal(t, driver.Success, r, "cuGreenCtxCreate")
	t.Cleanup(func() { assert.Equal(t, driver.Success, d.api.GreenCtxDestroy(g)) })
	h, r := d.api.GreenCtxStreamCreate(g, driver.StreamNonBlocking, 0)
	require.Equal(t, driver.Success, r, "cuGreenCtxStreamCreate")
	t.Cleanup(func() { assert.Equal(t, driver.Success, d.api.StreamDestroy(h)) })
	return g, h
}

func TestAGreenContextsStreamIsAStreamOfItsDevice(t *testing.T) {
	needsLearnedLayout(t)
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		g, h := greenStream(t, d)
		gctx, r := d.api.CtxFromGreenCtx(g)
		require.Equal(t, driver.Success, r)
		ctx, green, r := d.api.StreamGetCtx2(h)
		require.Equal(t, driver.Success, r)
		assert.Equal(t, c.handle, ctx, "cuStreamGetCtx_v2 names the primary context")
		assert.Equal(t, gctx, driver.Context(green), "and the green context")

		s, err := d.WrapStream(uintptr(h))
		require.NoError(t, err)
		assert.Equal(t, c.handle, s.Context().handle, "its objects are the primary context's")
		dev, id, err := d.StreamIdentity(uintptr(h))
		require.NoError(t, err)
		assert.Equal(t, 0, dev.Ordinal())
		require.NoError(t, d.VerifyStream(uintptr(h), id))

		// ordered both ways with the primary context's streams, through its events
		var j journal
		e := newEvent(t, c, EventOptions{DisableTiming: true})
		other := newStream(t, c, StreamOptions{NonBlocking: true})
		require.NoError(t, s.LaunchHostFunc(func() { time.Sleep(30 * time.Millisecond); j.add("green")() }))
		require.NoError(t, e.Record(s))
		require.NoError(t, other.WaitEvent(e))
		require.NoError(t, other.LaunchHostFunc(j.add("primary, after it")))
		require.NoError(t, other.LaunchHostFunc(func() { time.Sleep(30 * time.Millisecond); j.add("primary")() }))
		require.NoError(t, s.WaitStream(other))
		require.NoError(t, s.LaunchHostFunc(j.add("green, after it")))
		require.NoError(t, s.Synchronize())
		assert.Equal(t, []string{"green", "primary, after it", "primary", "green, after it"}, j.get())
		done, err := s.Query()
		require.NoError(t, err)
		assert.True(t, done)
		if d.Name() == "cuda" { // the software driver runs no kernels
			var args Args
			require.NoError(t, testKernel(t, c, "empty").Launch(s, LaunchConfig{}, &args), "a primary context's kernel on a green stream")
			require.NoError(t, s.Synchronize())
		}
	})
}

func TestAGreenContextsStreamGoneIsRefused(t *testing.T) {
	needsLearnedLayout(t)
	eachDriver(t, func(t *testing.T, d *Driver) {
		primary(t, d, 0)
		dev, r := d.api.DeviceGet(0)
		require.Equal(t, driver.Success, r)
		g, r := d.api.GreenCtxCreate(dev)
		if r == driver.ErrorNotSupported {
			t.Skipf("SKIP: the %s driver has no green contexts", d.Name())
		}
		require.Equal(t, driver.Success, r)
		defer d.api.GreenCtxDestroy(g)
		h, r := d.api.GreenCtxStreamCreate(g, driver.StreamNonBlocking, 0)
		require.Equal(t, driver.Success, r)
		_, id, err := d.StreamIdentity(uintptr(h))
		require.NoError(t, err)
		require.Equal(t, driver.Success, d.api.StreamDestroy(h))
		err = d.VerifyStream(uintptr(h), id)
		require.ErrorIs(t, err, ErrInvalidHandle)
	})
}

// A context of its own (cuCtxCreate) shares no objects with its device's primary context:
// the driver refuses the primary context's events on its streams (CUDA_ERROR_INVALID_HANDLE,
// seen on an H100). Its streams are refused at the wrap, saying what they are, rather than
// called "not live".
func TestAStreamOfAContextOfItsOwnIsRefusedSayingWhatItIs(t *testing.T) {
	needsLearnedLayout(t)
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		dev, r := d.api.DeviceGet(0)
		require.Equal(t, driver.Success, r)
		own, r := d.api.CtxCreate(dev)
		if r == driver.ErrorNotSupported {
			t.Skipf("SKIP: the %s driver has no cuCtxCreate", d.Name())
		}
		require.Equal(t, driver.Success, r, "cuCtxCreate")
		t.Cleanup(func() { assert.Equal(t, driver.Success, d.api.CtxDestroy(own)) })
		h, r := d.api.StreamCreateWithPriority(own, driver.StreamNonBlocking, 0)
		require.Equal(t, driver.Success, r)

		e := newEvent(t, c, EventOptions{DisableTiming: true})
		assert.Equal(t, driver.ErrorInvalidHandle, d.api.EventRecord(0, e.handle, h), "the driver's rule")

		_, err := d.WrapStream(uintptr(h))
		require.ErrorIs(t, err, ErrInvalidContext)
		assert.NotErrorIs(t, err, ErrInvalidHandle)
		assert.Contains(t, err.Error(), "live CUDA stream of context")
		assert.Contains(t, err.Error(), "cuCtxCreate")
		_, _, err = d.StreamIdentity(uintptr(h), Vouched())
		require.ErrorIs(t, err, ErrInvalidContext)
		require.Equal(t, driver.Success, d.api.StreamDestroy(h))
	})
}

// Which context a stream of a green context is, the real check asks the driver the first
// time (cuStreamGetCtx_v2): that question leaves a capture alone (seen on an H100), so a
// green stream first met while it captures is taken, and the capture goes on.
func TestAGreenStreamMetWhileCapturingLeavesTheCaptureAlone(t *testing.T) {
	needsLearnedLayout(t)
	eachDriver(t, func(t *testing.T, d *Driver) {
		primary(t, d, 0)
		_, h := greenStream(t, d)
		runtime.LockOSThread() // a global capture ends on the thread that began it
		defer runtime.UnlockOSThread()
		for _, mode := range []driver.CaptureMode{driver.CaptureModeGlobal, driver.CaptureModeRelaxed} {
			require.Equal(t, driver.Success, d.api.StreamBeginCapture(h, mode))
			s, err := d.WrapStream(uintptr(h))
			require.NoError(t, err)
			assert.Equal(t, uintptr(h), s.Handle())
			status, r := d.api.StreamIsCapturing(h)
			require.Equal(t, driver.Success, r)
			assert.Equal(t, driver.CaptureStatusActive, status, "the capture was not invalidated (mode %d)", mode)
			graph, r := d.api.StreamEndCapture(h)
			require.Equal(t, driver.Success, r)
			require.Equal(t, driver.Success, d.api.GraphDestroy(graph))
		}
	})
}

// An older driver (the software one reporting CUDA 12.4, a version before
// cuGreenCtxStreamCreate and cuStreamGetCtx_v2) lacks what is newer: those answer
// ErrorNotSupported, and everything else works as before. Below MinVersion the setting is
// refused, naming it.
func TestAnOlderDriverLacksOnlyWhatIsNewer(t *testing.T) {
	needsLearnedLayout(t)
	t.Setenv(sim.VersionSetting, "12040")
	d := newDriver(sim.New())
	v, r := d.api.DriverGetVersion()
	require.Equal(t, driver.Success, r)
	assert.Equal(t, 12040, v)
	c := primary(t, d, 0)
	_, r = d.api.GreenCtxCreate(0)
	assert.Equal(t, driver.ErrorNotSupported, r, "green contexts need cuGreenCtxStreamCreate (12.5)")
	theirs := newStream(t, c, StreamOptions{NonBlocking: true})
	_, _, r = d.api.StreamGetCtx2(driver.Stream(theirs.Handle()))
	assert.Equal(t, driver.ErrorNotSupported, r)
	s, err := d.WrapStream(theirs.Handle())
	require.NoError(t, err)
	e := newEvent(t, c, EventOptions{DisableTiming: true})
	require.NoError(t, e.Record(s))
	require.NoError(t, s.Synchronize())
	own, r := d.api.CtxCreate(0)
	require.Equal(t, driver.Success, r, "cuCtxCreate is old")
	require.Equal(t, driver.Success, d.api.CtxDestroy(own))

	for _, bad := range []string{"11080", "13010", "twelve"} {
		t.Setenv(sim.VersionSetting, bad)
		_, err := sim.ReportedVersion()
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), sim.VersionSetting, bad)
		t.Setenv("STREAMBRIDGE_DRIVER", "sim")
		_, err = Default()
		require.ErrorIs(t, err, ErrSetting, bad)
	}
}
