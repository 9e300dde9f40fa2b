package streams

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streambridge/streambridge/internal/driver"
)

func TestCaptureOnForeignStreamAndReplay(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		before := LiveHostFuncs()
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
		hostFuncsBackTo(t, before, "captured host functions are freed with the graph")
	})
}

func TestCaptureInvalidatedBySynchronize(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		s := newStream(t, c, StreamOptions{NonBlocking: true})
		require.NoError(t, s.BeginCapture(CaptureRelaxed))
		require.NoError(t, s.LaunchHostFunc(func() {}))
		assert.ErrorIs(t, s.Synchronize(), ErrCaptureUnsupported)
		st, _, err := s.CaptureInfo()
		require.NoError(t, err)
		assert.Equal(t, CaptureInvalidated, st)
		_, err = s.EndCapture()
		assert.ErrorIs(t, err, ErrCaptureInvalidated)
		capturing, err := s.IsCapturing()
		require.NoError(t, err)
		assert.False(t, capturing)
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
		before := LiveHostFuncs()
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
		hostFuncsBackTo(t, before, "freed once the launch in flight ran it")
	})
}

// A stream another library is capturing can be wrapped and used, in every capture mode:
// its identity is read, not asked of the driver, whose cuStreamGetId would fail there and
// invalidate the capture (seen on an H100 under torch.cuda.graph).
func TestWrapAStreamAnotherLibraryIsCapturing(t *testing.T) {
	for _, mode := range []driver.CaptureMode{driver.CaptureModeGlobal, driver.CaptureModeThreadLocal, driver.CaptureModeRelaxed} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			eachDriver(t, func(t *testing.T, d *Driver) {
				c := primary(t, d, 0)
				h := foreignStream(t, c, driver.StreamNonBlocking)
				require.NoError(t, d.check("cuStreamBeginCapture", d.api.StreamBeginCapture(driver.Stream(h), mode)))
				s, err := d.WrapStream(h)
				require.NoError(t, err)
				before := LiveHostFuncs()
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
				hostFuncsBackTo(t, before, "freed with the graph")
			})
		})
	}
}

// A host function captured while another library's capture runs is the graph's: freed
// when that library destroys the graph, with no call of this package's (it stayed
// registered for the process's life when the package kept captured functions itself).
func TestHostFuncsCapturedForAnotherLibraryAreFreedWithItsGraph(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		h := driver.Stream(foreignStream(t, c, driver.StreamNonBlocking))
		before := LiveHostFuncs()
		require.Equal(t, driver.Success, d.api.StreamBeginCapture(h, driver.CaptureModeRelaxed))
		s := wrapStream(t, c, uintptr(h))
		var count atomic.Int32
		for range 3 {
			require.NoError(t, s.LaunchHostFunc(func() { count.Add(1) }))
		}
		g, r := d.api.StreamEndCapture(h) // the other library's end, graph and launches
		require.Equal(t, driver.Success, r)
		var e driver.GraphExec
		require.Equal(t, driver.Success, c.do(func() (r driver.Result) { e, r = d.api.GraphInstantiateWithFlags(g, 0); return r }))
		require.Equal(t, driver.Success, d.api.GraphDestroy(g))
		require.Equal(t, driver.Success, d.api.GraphLaunch(e, h))
		require.Equal(t, driver.Success, d.api.GraphExecDestroy(e), "destroyed with its launch in flight")
		require.NoError(t, s.Synchronize())
		assert.Equal(t, int32(3), count.Load(), "the launch in flight ran them")
		hostFuncsBackTo(t, before, "freed once the graph and its executable were gone")
	})
}

// hostFuncsBackTo waits until the host-function table holds before entries again: the
// driver destroys a graph's user objects, which free its captured functions, on a thread
// of its own, after the call that destroyed the graph.
func hostFuncsBackTo(t *testing.T, before int, msg string) {
	t.Helper()
	require.Eventually(t, func() bool { return LiveHostFuncs() == before }, 10*time.Second, time.Millisecond, msg)
}
