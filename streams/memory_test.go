package streams

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streambridge/streambridge/internal/driver"
)

func TestMemoryCopies(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		const n = 1 << 16
		b, err := c.Alloc(n * 4)
		require.NoError(t, err)
		defer func() { require.NoError(t, b.Close()) }()
		src := make([]int32, n)
		for i := range src {
			src[i] = int32(i*7 - 3)
		}
		require.NoError(t, CopyToDevice(b, src))
		got := make([]int32, n)
		require.NoError(t, CopyFromDevice(got, b))
		assert.Equal(t, src, got)

		// Asynchronous copies run in stream order, behind slow work.
		s := newStream(t, c, StreamOptions{NonBlocking: true})
		src2 := make([]int32, n)
		for i := range src2 {
			src2[i] = int32(-i)
		}
		got2 := make([]int32, n)
		slowWork(t, s, 50*time.Millisecond)
		require.NoError(t, CopyToDeviceAsync(b, src2, s))
		require.NoError(t, CopyFromDeviceAsync(got2, b, s))
		require.NoError(t, s.Synchronize())
		assert.Equal(t, src2, got2)

		require.Error(t, CopyToDevice(b, make([]int32, n+1)), "larger than the buffer")
	})
}

// An allocation past the device's memory fails with ErrOutOfMemory, on either driver (the
// software one neither panics nor asks the host for it), and the memory freed is
// allocatable again.
func TestAllocationPastTheDevicesMemoryIsOutOfMemory(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		for _, size := range []uint64{1 << 40, 1 << 50} { // 1 TiB and 1 PiB: past any device
			b, err := c.Alloc(size)
			require.ErrorIs(t, err, ErrOutOfMemory, "%d bytes", size)
			assert.Nil(t, b)
		}
		b, err := c.Alloc(1 << 20)
		require.NoError(t, err)
		require.NoError(t, b.Close())
	})
}

// A buffer's close synchronizes its context first, as cuMemFree does on the real driver
// (H200, driver 580: bench/callback_waits.c, part two): it returns once every stream of the
// context has run what was enqueued before it, a host function that has not returned and a
// stream waiting on another stream's work included; then it frees.
func TestABuffersCloseWaitsForItsContextsWork(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		held := newStream(t, c, StreamOptions{NonBlocking: true})
		waiting := newStream(t, c, StreamOptions{NonBlocking: true})
		e := newEvent(t, c, EventOptions{DisableTiming: true})
		b, err := c.Alloc(1 << 20)
		require.NoError(t, err)
		gate := blockStream(t, held)
		require.NoError(t, held.Record(e))
		require.NoError(t, waiting.WaitEvent(e))
		closed := make(chan error, 1)
		go func() { closed <- b.Close() }()
		select {
		case err := <-closed:
			t.Fatalf("the buffer's close returned (%v) while its context's work was held up", err)
		case <-time.After(300 * time.Millisecond):
		}
		gate.open()
		select {
		case err := <-closed:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Fatal("the buffer's close did not return once its context's work ran")
		}
		ready, err := waiting.Query()
		require.NoError(t, err)
		assert.True(t, ready, "the close returned before the work it waited for ran")
	})
}

// A copy captured into a graph keeps its buffer: a Close meanwhile frees it only once the
// graph and its executable are gone, and the graph runs right meanwhile. Without it the
// instantiation of such a graph crashed the real driver (SIGSEGV in
// cuGraphInstantiateWithFlags, H200, driver 580: TestDifferentialSequences, seed 728).
func TestAGraphKeepsTheBufferItsCopiesUse(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		s := newStream(t, c, StreamOptions{NonBlocking: true})
		b, err := c.Alloc(64)
		require.NoError(t, err)
		src, got := make([]byte, 64), make([]byte, 64)
		for i := range src {
			src[i] = byte(i + 1)
		}
		require.NoError(t, s.BeginCapture(CaptureRelaxed))
		require.NoError(t, CopyToDeviceAsync(b, src, s))
		require.NoError(t, CopyFromDeviceAsync(got, b, s))
		g, err := s.EndCapture()
		require.NoError(t, err)
		require.NoError(t, b.Close())
		require.ErrorIs(t, CopyToDeviceAsync(b, src, s), ErrClosed)
		x, err := g.Instantiate()
		require.NoError(t, err)
		require.NoError(t, x.Launch(s))
		require.NoError(t, s.Synchronize())
		assert.Equal(t, src, got)
		assert.Zero(t, b.uses.word.Load()&usesDestroyed, "the graph keeps the buffer")
		require.NoError(t, g.Close())
		require.NoError(t, x.Close())
		assert.Eventually(t, func() bool { return b.uses.word.Load()&usesDestroyed != 0 }, 10*time.Second, time.Millisecond,
			"the buffer is freed once the graph and its executable are gone")
	})
}

// The software driver ends the process where a graph whose copy names freed memory is
// instantiated, as the real driver crashed (SIGSEGV in cuGraphInstantiateWithFlags, H200,
// driver 580): the child below frees the memory behind the buffer's back, which Buffer's
// own Close does not do while a graph keeps it (TestAGraphKeepsTheBufferItsCopiesUse).
func TestSimEndsTheProcessOnAGraphCopyingFreedMemory(t *testing.T) {
	if os.Getenv("STREAMBRIDGE_TEST_FREED_COPY") == "1" {
		d := Sim()
		c := primary(t, d, 0)
		s := newStream(t, c, StreamOptions{NonBlocking: true})
		b := newBuffer(t, c, 64)
		require.NoError(t, s.BeginCapture(CaptureRelaxed))
		require.NoError(t, CopyToDeviceAsync(b, make([]byte, 64), s))
		g, err := s.EndCapture()
		require.NoError(t, err)
		require.Equal(t, driver.Success, d.api.MemFree(b.ptr))
		_, err = g.Instantiate()
		t.Fatalf("the software driver instantiated a graph copying freed memory (%v)", err)
	}
	simEndsTheChild(t, "TestSimEndsTheProcessOnAGraphCopyingFreedMemory", "STREAMBRIDGE_TEST_FREED_COPY",
		"cuGraphInstantiateWithFlags was given a graph whose copy names memory freed since its capture")
}
