package streams

import (
	"encoding/hex"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streambridge/streambridge/internal/sim"
)

func TestEventRecordQuerySynchronize(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		s := newStream(t, c, StreamOptions{})
		e := newEvent(t, c, EventOptions{BlockingSync: true})
		done, err := e.Query()
		require.NoError(t, err)
		assert.True(t, done, "an event never recorded is complete")

		slowWork(t, s, 200*time.Millisecond)
		require.NoError(t, e.Record(s))
		done, err = e.Query()
		require.NoError(t, err)
		assert.False(t, done)
		require.NoError(t, e.Synchronize())
		done, err = e.Query()
		require.NoError(t, err)
		assert.True(t, done)
	})
}

// A stream holds sim.TimedRecordsPerStream records of events with timing that its work has
// not reached; one more blocks until one of them has run, on the real driver
// (bench/queue_depth.c) as on the software one. Records of an event without timing do not
// count, nor do another stream's. A thread that holds what the stream's head needs (a
// Python host callback's GIL) through that record never returns: python/native/holds.inc.
func TestARecordOfATimingEventWaitsForRoomOnItsStream(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		s := newStream(t, c, StreamOptions{NonBlocking: true})
		other := newStream(t, c, StreamOptions{NonBlocking: true})
		timed := newEvent(t, c, EventOptions{})
		untimed := newEvent(t, c, EventOptions{DisableTiming: true})
		held := blockStream(t, s)
		fence := newEvent(t, c, EventOptions{DisableTiming: true})
		require.NoError(t, s.Record(fence))
		// other is held up by s's host function too: a second one would queue behind it, as
		// a context's host functions run one at a time.
		require.NoError(t, other.WaitEvent(fence))
		for range sim.TimedRecordsPerStream {
			require.NoError(t, s.Record(timed))
		}
		for range 5000 {
			require.NoError(t, s.Record(untimed))
		}
		for range sim.TimedRecordsPerStream {
			require.NoError(t, other.Record(timed)) // its own room
		}
		returned := make(chan error, 1)
		go func() { returned <- s.Record(timed) }()
		select {
		case err := <-returned:
			t.Fatalf("a record past %d on a held-up stream returned (%v) before the stream moved",
				sim.TimedRecordsPerStream, err)
		case <-time.After(300 * time.Millisecond):
		}
		held.open()
		select {
		case err := <-returned:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Fatal("the record waiting for room did not return once the stream moved")
		}
		require.NoError(t, s.Synchronize())
		require.NoError(t, other.Synchronize())
	})
}

func TestEventElapsedTime(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		s := newStream(t, c, StreamOptions{})
		start, end := newEvent(t, c, EventOptions{}), newEvent(t, c, EventOptions{})

		_, err := start.ElapsedTime(end)
		assert.ErrorIs(t, err, ErrInvalidHandle, "never recorded")

		require.NoError(t, s.Record(start))
		slowWork(t, s, 100*time.Millisecond)
		require.NoError(t, s.Record(end))
		_, err = start.ElapsedTime(end)
		assert.ErrorIs(t, err, ErrNotReady, "end still pending")

		require.NoError(t, end.Synchronize())
		dt, err := start.ElapsedTime(end)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, dt, 90*time.Millisecond)

		untimed := newEvent(t, c, EventOptions{DisableTiming: true})
		require.NoError(t, s.Record(untimed))
		require.NoError(t, untimed.Synchronize())
		_, err = start.ElapsedTime(untimed)
		assert.ErrorIs(t, err, ErrInvalidHandle, "timing disabled")
	})
}

func TestEventOptionsValidated(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		_, err := c.NewEvent(EventOptions{Interprocess: true})
		assert.ErrorIs(t, err, ErrInvalidValue, "interprocess events must disable timing")

		e := newEvent(t, c, EventOptions{})
		_, err = e.IPCHandle()
		require.Error(t, err, "only interprocess events export a handle")
	})
}

// ipcChildEnv carries an exported event handle to the child process of
// TestIPCEventOrdersWorkInAnotherProcess.
const ipcChildEnv = "STREAMBRIDGE_TEST_IPC_EVENT"

func TestIPCEventOrdersWorkInAnotherProcess(t *testing.T) {
	d := realDriver(t)
	c := primary(t, d, 0)
	s := newStream(t, c, StreamOptions{NonBlocking: true})
	e := newEvent(t, c, EventOptions{DisableTiming: true, Interprocess: true})
	h, err := e.IPCHandle()
	require.NoError(t, err)

	// The producer outlasts the child's start, so the child's wait has work to wait for.
	slowWork(t, s, 4*time.Second)
	require.NoError(t, s.Record(e))

	cmd := exec.Command(os.Args[0], "-test.run=^TestIPCEventChild$", "-test.v")
	cmd.Env = append(os.Environ(), ipcChildEnv+"="+hex.EncodeToString(h[:]))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "child:\n%s", out)
	assert.Contains(t, string(out), "child: pending while the producer ran", "child:\n%s", out)
	assert.Contains(t, string(out), "child: completed after the producer", "child:\n%s", out)
	done, err := e.Query()
	require.NoError(t, err)
	assert.True(t, done, "the child's wait returned, so the producer's record has completed")
}

// TestIPCEventChild is the other process of TestIPCEventOrdersWorkInAnotherProcess; run
// alone it has nothing to do.
func TestIPCEventChild(t *testing.T) {
	enc := os.Getenv(ipcChildEnv)
	if enc == "" {
		t.Skip("SKIP: runs only as the child of TestIPCEventOrdersWorkInAnotherProcess")
	}
	raw, err := hex.DecodeString(enc)
	require.NoError(t, err)
	var h IPCEventHandle
	copy(h[:], raw)
	d := realDriver(t)
	c := primary(t, d, 0)
	imported, err := c.OpenIPCEvent(h)
	require.NoError(t, err)
	defer imported.Close()
	s := newStream(t, c, StreamOptions{NonBlocking: true})
	mine := newEvent(t, c, EventOptions{DisableTiming: true})
	require.NoError(t, s.WaitEvent(imported))
	require.NoError(t, s.Record(mine))
	done, err := mine.Query()
	require.NoError(t, err)
	if !done {
		t.Log("child: pending while the producer ran")
	}
	require.NoError(t, mine.Synchronize())
	done, err = imported.Query()
	require.NoError(t, err)
	if done {
		t.Log("child: completed after the producer")
	}
	t.Log(strings.Repeat("-", 8))
}

// The software driver, which cannot cross processes, opens IPC handles in the process that
// made them; the real driver refuses that (CUDA_ERROR_INVALID_CONTEXT, seen on an H200 with
// driver 580), so there the test pins down that refusal.
func TestIPCEventWithinOneProcess(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		if d.Name() == "cuda" {
			c := primary(t, d, 0)
			e := newEvent(t, c, EventOptions{DisableTiming: true, Interprocess: true})
			h, err := e.IPCHandle()
			require.NoError(t, err)
			_, err = c.OpenIPCEvent(h)
			assert.ErrorIs(t, err, ErrInvalidContext)
			return
		}
		ipcWithinOneProcess(t, d)
	})
}

// 64 zero bytes are no event's handle: the real driver answers CUDA_ERROR_MAP_FAILED (an
// H200, driver 580, asked through the Python package), and so does the software driver.
func TestIPCHandleOfZerosIsRefused(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		_, err := c.OpenIPCEvent(IPCEventHandle{})
		var r Result
		require.ErrorAs(t, err, &r)
		assert.Equal(t, "CUDA_ERROR_MAP_FAILED", r.Name())
	})
}

func ipcWithinOneProcess(t *testing.T, d *Driver) {
	c := primary(t, d, 0)
	producer := newStream(t, c, StreamOptions{NonBlocking: true})
	consumer := newStream(t, c, StreamOptions{NonBlocking: true})
	e := newEvent(t, c, EventOptions{DisableTiming: true, Interprocess: true})
	h, err := e.IPCHandle()
	require.NoError(t, err)
	opened, err := c.OpenIPCEvent(h)
	require.NoError(t, err)
	defer opened.Close()

	slowWork(t, producer, 200*time.Millisecond)
	require.NoError(t, producer.Record(e))
	require.NoError(t, consumer.WaitEvent(opened))
	after := newEvent(t, c, EventOptions{})
	require.NoError(t, consumer.Record(after))
	done, err := after.Query()
	require.NoError(t, err)
	assert.False(t, done)
	require.NoError(t, after.Synchronize())
	done, err = e.Query()
	require.NoError(t, err)
	assert.True(t, done)
}

// A fence (Stream.Fence) is known as the package's own while it lives, and only then; an
// event a caller made is not one (the Python package refuses to wrap a fence by handle).
func TestIsFenceKnowsTheFencesWhileTheyLive(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		s, other := newStream(t, c, StreamOptions{}), newStream(t, c, StreamOptions{})
		require.NoError(t, other.WaitStream(s))
		f, err := s.Fence()
		require.NoError(t, err)
		assert.True(t, d.IsFence(f.Handle()))
		e := newEvent(t, c, EventOptions{})
		assert.False(t, d.IsFence(e.Handle()))
		h := f.Handle()
		require.NoError(t, f.Close())
		assert.False(t, d.IsFence(h), "a fence its caller closed is destroyed, and forgotten")
		var nilDriver *Driver
		assert.False(t, nilDriver.IsFence(h))
	})
}
