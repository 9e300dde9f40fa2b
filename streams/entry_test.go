package streams

import (
	"reflect"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streambridge/streambridge/internal/driver"
)

// The C entry points a binding calls without Go (driver.API.Entry) order work as the methods
// do, on both drivers.
func TestEntryPointsOrderWork(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		entry := map[string]uintptr{}
		for _, name := range driver.EntryNames {
			entry[name] = d.api.Entry(name)
			require.NotZero(t, entry[name], name)
		}
		for _, e := range driver.EntryPoints { // only the listed calls are offered, by both drivers alike
			if !slices.Contains(driver.EntryNames, e.Name) {
				assert.Zero(t, d.api.Entry(e.Name), e.Name)
			}
		}
		call := func(name string, args ...uintptr) driver.Result {
			r, _, _ := purego.SyscallN(entry[name], args...)
			return driver.Result(int32(r))
		}
		c := primary(t, d, 0)
		producer := newStream(t, c, StreamOptions{NonBlocking: true})
		consumer := newStream(t, c, StreamOptions{NonBlocking: true})
		e := newEvent(t, c, EventOptions{DisableTiming: true})
		marker := newEvent(t, c, EventOptions{DisableTiming: true})

		slowWork(t, producer, 300*time.Millisecond)
		require.Equal(t, driver.Success, call("cuEventRecord", e.Handle(), producer.Handle()))
		require.Equal(t, driver.Success, call("cuStreamWaitEvent", consumer.Handle(), e.Handle(), 0))
		require.Equal(t, driver.Success, call("cuEventRecord", marker.Handle(), consumer.Handle()))
		assert.Equal(t, driver.ErrorNotReady, call("cuEventQuery", marker.Handle()), "the consumer waits")
		assert.Equal(t, driver.ErrorNotReady, call("cuStreamQuery", consumer.Handle()))
		require.NoError(t, marker.Synchronize())
		assert.Equal(t, driver.Success, call("cuStreamQuery", producer.Handle()), "the producer finished first")
		assert.Equal(t, driver.Success, call("cuEventQuery", e.Handle()))

		// cuLaunchHostFunc with a C function (a purego callback here), in stream order.
		status, statusAt := heapOut[int32]()
		*status = -1
		require.Equal(t, driver.Success, call("cuStreamGetCaptureInfo", consumer.Handle(), statusAt, 0, 0, 0, 0))
		assert.EqualValues(t, driver.CaptureStatusNone, *status)
		slowWork(t, consumer, 100*time.Millisecond)
		got := make(chan uintptr, 1)
		require.Equal(t, driver.Success, call("cuLaunchHostFunc", consumer.Handle(), hostFnForTest(got), 42))
		select {
		case v := <-got:
			t.Fatalf("the host function ran (%d) before the work before it", v)
		case <-time.After(20 * time.Millisecond):
		}
		require.NoError(t, consumer.Synchronize())
		assert.EqualValues(t, 42, <-got)
	})
}

var (
	hostFnOnce sync.Once
	hostFn     uintptr
	hostFnOut  atomic.Pointer[chan uintptr]
)

// hostFnForTest is a C function pointer that sends its userData to out.
func hostFnForTest(out chan uintptr) uintptr {
	hostFnOnce.Do(func() { hostFn = purego.NewCallback(func(v uintptr) { *hostFnOut.Load() <- v }) })
	hostFnOut.Store(&out)
	return hostFn
}

// The current-context pair the C core uses to run a special handle in its context.
func TestEntryPointsSetTheCurrentContext(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		call := callEntries(d)
		defer makeCurrent(t, call, c)()
		got, gotAt := heapOut[uintptr]()
		require.Equal(t, driver.Success, call("cuCtxGetCurrent", gotAt))
		assert.Equal(t, c.Handle(), *got)
		assert.Equal(t, driver.Success, call("cuStreamQuery", NullStream), "0 means the current context's stream")
	})
}

// The entry points with which the C core makes, waits for, times, exports and destroys the
// events it owns, in the context made current.
func TestEntryPointsMakeTimeAndDestroyEvents(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		s := newStream(t, c, StreamOptions{NonBlocking: true})
		call := callEntries(d)
		defer makeCurrent(t, call, c)()

		startOut, startAt := heapOut[uintptr]()
		endOut, endAt := heapOut[uintptr]()
		ipcOut, ipcAt := heapOut[uintptr]()
		_, junkAt := heapOut[uintptr]()
		require.Equal(t, driver.Success, call("cuEventCreate", startAt, 0))
		require.Equal(t, driver.Success, call("cuEventCreate", endAt, 0))
		require.Equal(t, driver.Success, call("cuEventCreate", ipcAt,
			uintptr(driver.EventInterprocess|driver.EventDisableTiming)))
		start, end, ipc := *startOut, *endOut, *ipcOut
		require.NotZero(t, start)
		assert.Equal(t, driver.ErrorInvalidValue, call("cuEventCreate", junkAt, uintptr(driver.EventInterprocess)),
			"an interprocess event without timing disabled")

		require.Equal(t, driver.Success, call("cuEventRecord", start, s.Handle()))
		slowWork(t, s, 20*time.Millisecond)
		require.Equal(t, driver.Success, call("cuEventRecord", end, s.Handle()))
		require.Equal(t, driver.Success, call("cuEventSynchronize", end))
		done, err := s.Query()
		require.NoError(t, err)
		assert.True(t, done, "the stream's work ran before the event completed")
		ms, msAt := heapOut[float32]()
		require.Equal(t, driver.Success, call("cuEventElapsedTime", msAt, start, end))
		assert.Greater(t, *ms, float32(0))

		h, hAt := heapOut[IPCEventHandle]()
		require.Equal(t, driver.Success, call("cuIpcGetEventHandle", hAt, ipc))
		assert.NotEqual(t, IPCEventHandle{}, *h)
		assert.Equal(t, driver.ErrorInvalidHandle, call("cuIpcGetEventHandle", hAt, start),
			"a timing event is not interprocess (the real driver's answer: seen on an H100)")

		for _, e := range []uintptr{start, end, ipc} {
			require.Equal(t, driver.Success, call("cuEventDestroy", e))
		}
	})
}

// The entry points with which the C core makes and destroys the streams it owns, in the
// context made current: flags and priority as asked (the priority clamped to the device's
// range, as the driver does), and a destroyed stream refused by the check.
func TestEntryPointsMakeAndDestroyStreams(t *testing.T) {
	needsLearnedLayout(t)
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		call := callEntries(d)
		defer makeCurrent(t, call, c)()
		least, greatest, err := c.StreamPriorityRange()
		require.NoError(t, err)
		leastOut, leastAt := heapOut[int32]()
		greatestOut, greatestAt := heapOut[int32]()
		require.Equal(t, driver.Success, call("cuCtxGetStreamPriorityRange", leastAt, greatestAt))
		assert.Equal(t, []int{least, greatest}, []int{int(*leastOut), int(*greatestOut)}, "the current context's range")

		out, at := heapOut[uintptr]()
		require.Equal(t, driver.Success, call("cuStreamCreateWithPriority", at, uintptr(driver.StreamNonBlocking),
			uintptr(greatest-1)))
		h := *out
		w, err := c.WrapStream(h)
		require.NoError(t, err, "a live stream of the current context")
		nonBlocking, err := w.NonBlocking()
		require.NoError(t, err)
		assert.True(t, nonBlocking)
		p, err := w.Priority()
		require.NoError(t, err)
		assert.Equal(t, greatest, p, "clamped to the greatest priority")
		assert.NotEqual(t, least, greatest-1)
		require.NoError(t, w.Close(), "a borrowed stream's close destroys nothing")
		require.Equal(t, driver.Success, call("cuStreamQuery", h))

		require.Equal(t, driver.Success, call("cuStreamDestroy", h))
		_, err = c.WrapStream(h)
		assert.ErrorIs(t, err, ErrInvalidHandle, "destroyed")
	})
}

// Disown hands the CUevent over undestroyed: the new owner can still use and destroy it.
func TestEventDisownHandsTheHandleOver(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		e, err := c.NewEvent(EventOptions{DisableTiming: true})
		require.NoError(t, err)
		h, err := e.Disown()
		require.NoError(t, err)
		require.NotZero(t, h)
		again, err := e.Disown()
		assert.Zero(t, again, "once")
		assert.NoError(t, err)
		assert.ErrorIs(t, e.Synchronize(), ErrClosed, "the Event is closed")
		require.NoError(t, e.Close(), "closing it again destroys nothing")
		r, _, _ := purego.SyscallN(d.api.Entry("cuEventQuery"), h)
		assert.Equal(t, driver.Success, driver.Result(int32(r)), "the event lives on")
		r, _, _ = purego.SyscallN(d.api.Entry("cuEventDestroy"), h)
		assert.Equal(t, driver.Success, driver.Result(int32(r)))
	})
}

// callEntries calls d's C entry points by name.
func callEntries(d *Driver) func(name string, args ...uintptr) driver.Result {
	return func(name string, args ...uintptr) driver.Result {
		r, _, _ := purego.SyscallN(d.api.Entry(name), args...)
		return driver.Result(int32(r))
	}
}

// makeCurrent locks the goroutine to its thread and makes c current there through the
// entry points; the function it returns puts the previous context back and unlocks.
func makeCurrent(t *testing.T, call func(string, ...uintptr) driver.Result, c *Context) func() {
	runtime.LockOSThread()
	prev, prevAt := heapOut[uintptr]()
	require.Equal(t, driver.Success, call("cuCtxGetCurrent", prevAt))
	require.Equal(t, driver.Success, call("cuCtxSetCurrent", c.Handle()))
	return func() {
		call("cuCtxSetCurrent", *prev)
		runtime.UnlockOSThread()
	}
}

// heapOut is a new T and its address, for a C out-parameter. It is on the heap (reflect.New
// always allocates there): a callback into Go, as the software driver's entry points are,
// can grow and so move the calling goroutine's stack under an address C holds (a stack
// variable's address made TestEntryPointsMakeTimeAndDestroyEvents/sim read 0 under -race).
func heapOut[T any]() (*T, uintptr) {
	p := reflect.New(reflect.TypeFor[T]()).Interface().(*T)
	return p, uintptr(unsafe.Pointer(p))
}

// C callbacks for the user-object test: a host function that counts its calls by userData,
// and a destructor that counts its calls; made once (purego's callbacks are never freed).
var (
	userObjectCallbacks     sync.Once
	hostCalls               sync.Map // userData -> *atomic.Int32
	destroyed               sync.Map // ptr -> *atomic.Int32
	countHost, countDestroy uintptr
	growThenCount           uintptr // countDestroy after growing the stack by ~0.5 MiB
	tags                    atomic.Uint64
)

// deep uses about n*256 bytes of stack: enough to make Go grow, and so move, it.
func deep(n int) int {
	var pad [256]byte
	pad[n%256] = byte(n)
	if n == 0 {
		return int(pad[0])
	}
	return deep(n-1) + int(pad[n%256])
}

func makeUserObjectCallbacks() {
	userObjectCallbacks.Do(func() {
		countHost = purego.NewCallback(func(ud uintptr) uintptr { counter(&hostCalls, ud).Add(1); return 0 })
		countDestroy = purego.NewCallback(func(p uintptr) uintptr { counter(&destroyed, p).Add(1); return 0 })
		growThenCount = purego.NewCallback(func(p uintptr) uintptr { deep(2000); counter(&destroyed, p).Add(1); return 0 })
	})
}

// captureHostFunc does through the entry points what the Python core does for a callback
// launched on a capturing stream s: countHost(tag) is launched on s, and a user object
// destroyed with destroy(tag) is moved to the graph being captured, which it returns.
func captureHostFunc(t *testing.T, call func(string, ...uintptr) driver.Result, s *Stream, tag, destroy uintptr) uintptr {
	t.Helper()
	status, statusAt := heapOut[int32]()
	graph, graphAt := heapOut[uintptr]()
	require.Equal(t, driver.Success, call("cuStreamGetCaptureInfo", s.Handle(), statusAt, 0, graphAt, 0, 0))
	require.Equal(t, int32(driver.CaptureStatusActive), *status)
	require.NotZero(t, *graph, "the graph being captured")
	obj, objAt := heapOut[uintptr]()
	require.Equal(t, driver.Success, call("cuUserObjectCreate", objAt, tag, destroy, 1, 1))
	require.Equal(t, driver.Success, call("cuGraphRetainUserObject", *graph, *obj, 1, 1), "moved to the graph")
	require.Equal(t, driver.Success, call("cuLaunchHostFunc", s.Handle(), countHost, tag))
	return *graph
}

func counter(m *sync.Map, key uintptr) *atomic.Int32 {
	c, _ := m.LoadOrStore(key, new(atomic.Int32))
	return c.(*atomic.Int32)
}

// A C host function captured into a graph runs at every launch with its userData, and a
// user object the graph holds (cuUserObjectCreate, cuGraphRetainUserObject during the
// capture, with the graph cuStreamGetCaptureInfo names) is destroyed once the graph and
// its executable are both gone, not before: how the Python core ties a captured Python
// callback to the graph, on both drivers.
func TestEntryPointsTieAUserObjectToACapturedGraph(t *testing.T) {
	makeUserObjectCallbacks()
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		call := callEntries(d)
		defer makeCurrent(t, call, c)()
		s := newStream(t, c, StreamOptions{NonBlocking: true})
		tag := uintptr(tags.Add(1)) // this run's userData and object pointer: no run sees another's counts
		require.NoError(t, s.BeginCapture(CaptureRelaxed))

		graph := captureHostFunc(t, call, s, tag, countDestroy)

		g, err := s.EndCapture()
		require.NoError(t, err)
		assert.Equal(t, graph, uintptr(g.handle), "the graph the capture named")
		exec, err := g.Instantiate()
		require.NoError(t, err)
		require.NoError(t, g.Close())
		for range 3 {
			require.NoError(t, exec.Launch(s))
		}
		require.NoError(t, s.Synchronize())
		assert.Equal(t, int32(3), counter(&hostCalls, tag).Load(), "once per launch, none at capture")
		assert.Zero(t, counter(&destroyed, tag).Load(), "the executable still holds it")

		require.NoError(t, exec.Close())
		require.Eventually(t, func() bool { return counter(&destroyed, tag).Load() == 1 }, 10*time.Second, time.Millisecond,
			"destroyed once the graph and its executable are gone")
		time.Sleep(10 * time.Millisecond)
		assert.Equal(t, int32(1), counter(&destroyed, tag).Load(), "once")
	})
}

// The driver may run a user object's destructor inside the call that releases the last
// reference, on the calling thread: on the H100, cuStreamEndCapture of a capture that
// failed did, and a destructor that called into Go and grew the goroutine's stack moved the
// frame the driver's result was written to, so the failure read as success. The calls that
// can release graphs keep their frame on the heap (internal/cuda, callReentrant).
func TestAFailedCaptureIsReportedWhenItsUserObjectCallsIntoGo(t *testing.T) {
	makeUserObjectCallbacks()
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		call := callEntries(d)
		defer makeCurrent(t, call, c)()
		origin := newStream(t, c, StreamOptions{NonBlocking: true})
		side := newStream(t, c, StreamOptions{NonBlocking: true})
		fork := newEvent(t, c, EventOptions{DisableTiming: true})
		tag := uintptr(tags.Add(1))
		for round := range 3 {
			require.NoError(t, origin.BeginCapture(CaptureGlobal))
			require.NoError(t, origin.Record(fork))
			require.NoError(t, side.WaitEvent(fork)) // side joins, and is never joined back
			captureHostFunc(t, call, side, tag, growThenCount)
			_, err := origin.EndCapture()
			require.ErrorIs(t, err, ErrCaptureUnjoined, "round %d", round)
			require.Eventually(t, func() bool { return counter(&destroyed, tag).Load() == int32(round+1) }, 10*time.Second,
				time.Millisecond, "the failed capture's graph was destroyed, and its user object")
		}
	})
}
