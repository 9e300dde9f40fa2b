package streams

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streambridge/streambridge/internal/driver"
)

func TestCaptureOnForeignStreamAndReplay(t *testing.T) {
	needsLearnedLayout(t)
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		before := settledHostFuncs()
		s, err := d.WrapStream(foreignStream(t, c, driver.StreamNonBlocking))
		require.NoError(t, err)
		var j journal
		require.NoError(t, s.BeginCapture(CaptureGlobal))
		capturing, err := s.IsCapturing()
		require.NoError(t, err)
		assert.True(t, capturing)
		st, id, err := s.CaptureInfo()
		require.NoError(t, err)
		assert.Equal(t, CaptureActive, st)
		assert.NotZero(t, id)
		for _, name := range []string{"a", "b", "c"} {
			require.NoError(t, s.LaunchHostFunc(j.add(name)))
		}
		g, err := s.EndCapture()
		require.NoError(t, err)
		settle()
		assert.Empty(t, j.get(), "captured work does not run")
		capturing, err = s.IsCapturing()
		require.NoError(t, err)
		assert.False(t, capturing)
		nodes, err := g.NodeCount()
		require.NoError(t, err)
		assert.Equal(t, 3, nodes)

		exec, err := g.Instantiate()
		require.NoError(t, err)
		other := newStream(t, c, StreamOptions{})
		require.NoError(t, exec.Upload(other))
		for range 5 {
			require.NoError(t, exec.Launch(other))
		}
		require.NoError(t, other.Synchronize())
		var want []string
		for range 5 {
			want = append(want, "a", "b", "c")
		}
		assert.Equal(t, want, j.get())
		require.NoError(t, exec.Close())
		require.NoError(t, g.Close())
		require.NoError(t, g.Close())
		require.NoError(t, other.Synchronize()) // the release runs behind the launches
		hostFuncsBackTo(t, before)              // captured host functions are freed with the graph
	})
}

// A query or a synchronize of a capturing stream: the driver refuses them and invalidates
// the capture, so while a capture BeginCapture began may be going on they are refused first
// (ErrCapturing), and the capture goes on.
func TestQueryAndSynchronizeOfACapturingStreamAreRefusedFirst(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		s := newStream(t, c, StreamOptions{NonBlocking: true})
		other := newStream(t, c, StreamOptions{NonBlocking: true})
		require.NoError(t, s.BeginCapture(CaptureRelaxed))
		require.NoError(t, s.LaunchHostFunc(func() {}))
		assert.ErrorIs(t, s.Synchronize(), ErrCapturing)
		_, err := s.Query()
		assert.ErrorIs(t, err, ErrCapturing)
		ready, err := other.Query()
		require.NoError(t, err, "a stream that does not capture answers")
		assert.True(t, ready)
		require.NoError(t, other.Synchronize())
		st, _, err := s.CaptureInfo()
		require.NoError(t, err)
		assert.Equal(t, CaptureActive, st, "the capture goes on")
		mustEndCapture(t, s)
		_, err = s.Query()
		require.NoError(t, err, "after the capture")

		// what the driver itself does
		require.NoError(t, s.BeginCapture(CaptureRelaxed))
		assert.Equal(t, driver.ErrorCaptureUnsupported, d.api.StreamSynchronize(0, driver.Stream(s.Handle())))
		st, _, err = s.CaptureInfo()
		require.NoError(t, err)
		assert.Equal(t, CaptureInvalidated, st)
		_, err = s.EndCapture()
		assert.ErrorIs(t, err, ErrCaptureInvalidated)
		capturing, err := s.IsCapturing()
		require.NoError(t, err)
		assert.False(t, capturing)
	})
}

// An event recorded into a capture has no work to wait for while the capture goes on: the
// driver refuses its query and synchronize in every mode and invalidates the capture (seen
// on an H200), so they are refused first (ErrCapturing), and the capture goes on. Recorded
// again outside a capture, it answers.
func TestQueryOfAnEventRecordedInACaptureIsRefusedFirst(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		other := newStream(t, c, StreamOptions{NonBlocking: true})
		e := newEvent(t, c, EventOptions{DisableTiming: true})
		for _, mode := range []CaptureMode{CaptureGlobal, CaptureThreadLocal, CaptureRelaxed} {
			s := newStream(t, c, StreamOptions{NonBlocking: true})
			require.NoError(t, s.BeginCapture(mode))
			require.NoError(t, s.LaunchHostFunc(func() {}))
			require.NoError(t, s.Record(e))
			_, err := e.Query()
			assert.ErrorIs(t, err, ErrCapturing, "mode %d", mode)
			assert.ErrorIs(t, e.Synchronize(), ErrCapturing, "mode %d", mode)
			st, _, err := s.CaptureInfo()
			require.NoError(t, err)
			assert.Equal(t, CaptureActive, st, "the capture goes on (mode %d)", mode)
			mustEndCapture(t, s)
			require.NoError(t, other.Record(e))
			require.NoError(t, e.Synchronize(), "recorded outside a capture")
			done, err := e.Query()
			require.NoError(t, err)
			assert.True(t, done)
		}
	})
}

// An event remembers the capture its last record went into, not the stream: once that
// capture ended, a new capture on the same stream does not make the event's query refused
// (Event.capturedIn, by the capture's serial). The query goes to the driver, relaxed, and
// the new capture goes on.
func TestEventRecordedInAnEndedCaptureIsNotRefusedForTheNext(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		e := newEvent(t, c, EventOptions{DisableTiming: true})
		s := newStream(t, c, StreamOptions{NonBlocking: true})
		require.NoError(t, s.BeginCapture(CaptureGlobal))
		require.NoError(t, s.Record(e))
		mustEndCapture(t, s)

		require.NoError(t, s.BeginCapture(CaptureGlobal))
		_, err := e.Query()
		assert.NotErrorIs(t, err, ErrCapturing, "the capture that took e's record has ended")
		st, _, err := s.CaptureInfo()
		require.NoError(t, err)
		assert.Equal(t, CaptureActive, st, "the new capture goes on")
		mustEndCapture(t, s)
	})
}

func TestCaptureForkJoinAcrossStreams(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		origin := newStream(t, c, StreamOptions{NonBlocking: true})
		side := newStream(t, c, StreamOptions{NonBlocking: true})
		fork, join := newEvent(t, c, EventOptions{DisableTiming: true}), newEvent(t, c, EventOptions{DisableTiming: true})
		var j journal
		require.NoError(t, origin.BeginCapture(CaptureGlobal))
		require.NoError(t, origin.Record(fork))
		require.NoError(t, side.WaitEvent(fork))
		capturing, err := side.IsCapturing()
		require.NoError(t, err)
		assert.True(t, capturing, "waiting on a captured event joins the capture")
		require.NoError(t, side.LaunchHostFunc(j.add("side")))
		require.NoError(t, side.Record(join))
		require.NoError(t, origin.WaitEvent(join))
		require.NoError(t, origin.LaunchHostFunc(j.add("origin")))
		g, err := origin.EndCapture()
		require.NoError(t, err)
		nodes, err := g.NodeCount()
		require.NoError(t, err)
		assert.Equal(t, 2, nodes)
		exec, err := g.Instantiate()
		require.NoError(t, err)
		require.NoError(t, exec.Launch(origin))
		require.NoError(t, exec.Close())
		require.NoError(t, g.Close())
		require.NoError(t, origin.Synchronize())
		assert.Equal(t, []string{"side", "origin"}, j.get())
	})
}

func TestCaptureWithUnjoinedWorkFails(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		origin := newStream(t, c, StreamOptions{NonBlocking: true})
		side := newStream(t, c, StreamOptions{NonBlocking: true})
		fork := newEvent(t, c, EventOptions{DisableTiming: true})
		require.NoError(t, origin.BeginCapture(CaptureGlobal))
		require.NoError(t, origin.Record(fork))
		require.NoError(t, side.WaitEvent(fork))
		require.NoError(t, side.LaunchHostFunc(func() {}))
		_, err := origin.EndCapture()
		assert.ErrorIs(t, err, ErrCaptureUnjoined)
	})
}

func TestGraphExecClosedWhileInFlightStillRunsItsHostFuncs(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		panics := capturePanics(t)
		c := primary(t, d, 0)
		before := settledHostFuncs()
		s := newStream(t, c, StreamOptions{NonBlocking: true})
		var count atomic.Int32
		require.NoError(t, s.BeginCapture(CaptureGlobal))
		require.NoError(t, s.LaunchHostFunc(func() { count.Add(1) }))
		g, err := s.EndCapture()
		require.NoError(t, err)
		exec, err := g.Instantiate()
		require.NoError(t, err)

		slowWork(t, s, 200*time.Millisecond)
		require.NoError(t, exec.Launch(s))
		require.NoError(t, exec.Close())
		require.NoError(t, g.Close())
		require.NoError(t, s.Synchronize())
		assert.Equal(t, int32(1), count.Load())
		assert.Empty(t, panics())
		hostFuncsBackTo(t, before)
	})
}

// A stream another library is capturing can be wrapped and used, in every capture mode:
// its identity is read, not asked of the driver, whose cuStreamGetId would fail there and
// invalidate the capture (seen on an H100 under torch.cuda.graph).
func TestWrapAStreamAnotherLibraryIsCapturing(t *testing.T) {
	needsLearnedLayout(t)
	for _, mode := range []driver.CaptureMode{driver.CaptureModeGlobal, driver.CaptureModeThreadLocal, driver.CaptureModeRelaxed} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			eachDriver(t, func(t *testing.T, d *Driver) {
				// the other library begins and ends its capture on one thread, as CUDA wants
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				c := primary(t, d, 0)
				h := foreignStream(t, c, driver.StreamNonBlocking)
				require.NoError(t, d.check("cuStreamBeginCapture", d.api.StreamBeginCapture(driver.Stream(h), mode)))
				s, err := d.WrapStream(h)
				require.NoError(t, err)
				before := settledHostFuncs()
				var j journal
				require.NoError(t, s.LaunchHostFunc(j.add("captured")))
				id, err := s.ID()
				require.NoError(t, err)
				assert.NotZero(t, id)
				st, _, err := s.CaptureInfo()
				require.NoError(t, err)
				assert.Equal(t, CaptureActive, st, "the checks left the capture valid")
				g, err := s.EndCapture()
				require.NoError(t, err)
				nodes, err := g.NodeCount()
				require.NoError(t, err)
				assert.Equal(t, 1, nodes, "the host function was captured")
				require.NoError(t, g.Close())
				require.NoError(t, s.Close())
				hostFuncsBackTo(t, before) // the graph's, though another library ended the capture
			})
		})
	}
}

// A query of a borrowed stream that another library captures on: the driver would refuse it
// in every mode and invalidate that library's capture, so a borrowed stream's query always
// asks first and is refused (ErrCapturing); the capture goes on, and the library ends it.
func TestQueryOfABorrowedStreamAnotherLibraryCapturesIsRefusedFirst(t *testing.T) {
	for _, mode := range []driver.CaptureMode{driver.CaptureModeGlobal, driver.CaptureModeThreadLocal, driver.CaptureModeRelaxed} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			eachDriver(t, func(t *testing.T, d *Driver) {
				runtime.LockOSThread() // the other library begins and ends on one thread
				defer runtime.UnlockOSThread()
				c := primary(t, d, 0)
				h := foreignStream(t, c, driver.StreamNonBlocking)
				s := wrapStream(t, c, h)
				ready, err := s.Query()
				require.NoError(t, err)
				assert.True(t, ready, "idle, before the capture")
				require.NoError(t, d.check("cuStreamBeginCapture", d.api.StreamBeginCapture(driver.Stream(h), mode)))
				_, err = s.Query()
				assert.ErrorIs(t, err, ErrCapturing)
				st, _, err := s.CaptureInfo()
				require.NoError(t, err)
				assert.Equal(t, CaptureActive, st, "the capture goes on")
				g, r := d.api.StreamEndCapture(driver.Stream(h))
				require.Equal(t, driver.Success, r, "the library ends its capture")
				require.Equal(t, driver.Success, d.api.GraphDestroy(g))
				ready, err = s.Query()
				require.NoError(t, err, "after the capture")
				assert.True(t, ready)
			})
		})
	}
}

// The legacy stream synchronizes with every blocking stream: while one captures, the
// driver refuses any use of the legacy stream, in every capture mode, and invalidates that
// capture (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT). Each use of a wrapper of the legacy stream
// (handles 0 and 1) is refused first (ErrCapturing), and the capture goes on; a
// non-blocking stream, and the legacy stream after the capture, work.
func TestTheLegacyStreamIsRefusedWhileABlockingStreamCaptures(t *testing.T) {
	for _, mode := range []driver.CaptureMode{driver.CaptureModeGlobal, driver.CaptureModeThreadLocal, driver.CaptureModeRelaxed} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			eachDriver(t, func(t *testing.T, d *Driver) {
				c := primary(t, d, 0)
				blocking := newStream(t, c, StreamOptions{})
				other := newStream(t, c, StreamOptions{NonBlocking: true})
				e := newEvent(t, c, EventOptions{DisableTiming: true})
				require.NoError(t, other.Record(e))
				require.NoError(t, blocking.BeginCapture(CaptureMode(mode)))
				require.NoError(t, blocking.LaunchHostFunc(func() {}))
				for _, h := range []uintptr{NullStream, LegacyStream} {
					legacy := wrapStream(t, c, h)
					uses := map[string]func() error{
						"Query":          func() error { _, err := legacy.Query(); return err },
						"Synchronize":    legacy.Synchronize,
						"Record":         func() error { return legacy.Record(e) },
						"WaitEvent":      func() error { return legacy.WaitEvent(e) },
						"LaunchHostFunc": func() error { return legacy.LaunchHostFunc(func() {}) },
						"IsCapturing":    func() error { _, err := legacy.IsCapturing(); return err },
					}
					for name, use := range uses {
						assert.ErrorIs(t, use(), ErrCapturing, "%s of handle %d", name, h)
					}
				}
				require.NoError(t, other.Synchronize(), "a non-blocking stream answers")
				ready, err := other.Query()
				require.NoError(t, err)
				assert.True(t, ready)
				st, _, err := blocking.CaptureInfo()
				require.NoError(t, err)
				assert.Equal(t, CaptureActive, st, "the capture goes on")
				mustEndCapture(t, blocking)
				legacy := wrapStream(t, c, LegacyStream)
				require.NoError(t, legacy.Record(e), "after the capture")
				require.NoError(t, legacy.Synchronize())
			})
		})
	}
}

// A graph launched into a capture: the driver refuses it in every mode and invalidates
// the capture (H100, driver 580; the software driver does the same), so Launch refuses it
// first, with ErrCapturing, and the capture goes on.
func TestGraphLaunchIntoACaptureIsRefusedFirst(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		s := newStream(t, c, StreamOptions{NonBlocking: true})
		capturing := newStream(t, c, StreamOptions{NonBlocking: true})
		e := newEvent(t, c, EventOptions{DisableTiming: true})
		require.NoError(t, s.BeginCapture(CaptureRelaxed))
		require.NoError(t, s.Record(e))
		g, err := s.EndCapture()
		require.NoError(t, err)
		defer g.Close()
		exec, err := g.Instantiate()
		require.NoError(t, err)
		defer exec.Close()

		require.NoError(t, capturing.BeginCapture(CaptureRelaxed))
		require.ErrorIs(t, exec.Launch(capturing), ErrCapturing)
		st, _, err := capturing.CaptureInfo()
		require.NoError(t, err)
		assert.Equal(t, CaptureActive, st, "the capture goes on")
		outer, err := capturing.EndCapture()
		require.NoError(t, err)
		require.NoError(t, outer.Close())

		// what the driver itself does with it
		require.NoError(t, capturing.BeginCapture(CaptureRelaxed))
		r := d.api.GraphLaunch(driver.GraphExec(exec.Handle()), driver.Stream(capturing.Handle()))
		assert.Equal(t, driver.ErrorCaptureUnsupported, r)
		st, _, err = capturing.CaptureInfo()
		require.NoError(t, err)
		assert.Equal(t, CaptureInvalidated, st)
		_, err = capturing.EndCapture()
		require.ErrorIs(t, err, ErrCaptureInvalidated)
	})
}
