package streams

import (
	"runtime"
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

// The C entry points a binding calls without Go (Driver.Entry) order work as the methods
// do, on both drivers.
func TestEntryPointsOrderWork(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		entry := map[string]uintptr{}
		for _, name := range driver.EntryNames {
			entry[name] = d.Entry(name)
			require.NotZero(t, entry[name], name)
		}
		assert.Zero(t, d.Entry("cuMemAlloc"), "only the listed calls are offered")
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
		var status int32 = -1
		require.Equal(t, driver.Success, call("cuStreamIsCapturing", consumer.Handle(), uintptr(unsafe.Pointer(&status))))
		assert.EqualValues(t, driver.CaptureStatusNone, status)
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
		call := func(name string, args ...uintptr) driver.Result {
			r, _, _ := purego.SyscallN(d.Entry(name), args...)
			return driver.Result(int32(r))
		}
		c := primary(t, d, 0)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var prev uintptr
		require.Equal(t, driver.Success, call("cuCtxGetCurrent", uintptr(unsafe.Pointer(&prev))))
		require.Equal(t, driver.Success, call("cuCtxSetCurrent", c.Handle()))
		defer call("cuCtxSetCurrent", prev)
		var got uintptr
		require.Equal(t, driver.Success, call("cuCtxGetCurrent", uintptr(unsafe.Pointer(&got))))
		assert.Equal(t, c.Handle(), got)
		assert.Equal(t, driver.Success, call("cuStreamQuery", NullStream), "0 means the current context's stream")
	})
}
