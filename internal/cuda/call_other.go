//go:build !amd64

package cuda

import (
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/streambridge/streambridge/internal/driver"
)

// On other architectures calls go through purego.SyscallN; out-parameters live on the
// heap, where they cannot move, and a context switch is separate calls on a locked thread.

func call(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}

// inContext runs body with ctx current on a locked thread, restoring the previous one.
func inContext(ctx uintptr, body func() uintptr) uintptr {
	if ctx == 0 {
		return body()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r, prev := callOut(cuCtxGetCurrent, 0, 0)
	if r != 0 {
		return r
	}
	if uintptr(prev) != ctx {
		if r := call(cuCtxSetCurrent, ctx); r != 0 {
			return r
		}
		defer call(cuCtxSetCurrent, uintptr(prev))
	}
	return body()
}

func callIn(ctx, fn uintptr, args ...uintptr) uintptr {
	return inContext(ctx, func() uintptr { return call(fn, args...) })
}

// callRelaxedIn is callIn with the thread's capture mode relaxed for the call (see
// call_amd64.go and relaxedIn).
func callRelaxedIn(ctx, fn uintptr, args ...uintptr) uintptr {
	r, _ := relaxedIn(ctx, fn, -1, args)
	return r
}

// relaxedIn is every relaxed call here (callRelaxedIn, callOutRelaxed,
// callReentrantRelaxedIn): in ctx, the exchange, the call (callOut's; outAt < 0: no
// out-parameter) and the exchange back on one locked thread. purego.SyscallN's arguments
// and out-parameters are on the heap already, so a call that calls back needs nothing more.
func relaxedIn(ctx, fn uintptr, outAt int, args []uintptr) (uintptr, uint64) {
	var out uint64
	r := inContext(ctx, func() uintptr {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		mode := new(uint32) // relaxed, then the mode the driver says the thread had
		*mode = uint32(driver.CaptureModeRelaxed)
		if r := call(cuThreadExchangeStreamCaptureMode, uintptr(unsafe.Pointer(mode))); r != 0 {
			return r
		}
		var r uintptr
		r, out = callReentrant(fn, outAt, args...)
		call(cuThreadExchangeStreamCaptureMode, uintptr(unsafe.Pointer(mode)))
		runtime.KeepAlive(mode)
		return r
	})
	return r, out
}

func callOut(fn uintptr, outAt int, args ...uintptr) (uintptr, uint64) {
	r, a, _ := callOuts(fn, outAt, 1, args)
	return r, a
}

func callOutIn(ctx, fn uintptr, outAt int, args ...uintptr) (uintptr, uint64) {
	var out uint64
	r := inContext(ctx, func() uintptr { r, o := callOut(fn, outAt, args...); out = o; return r })
	return r, out
}

func callOut2In(ctx, fn uintptr, outAt int, args ...uintptr) (uintptr, uint64, uint64) {
	var o1, o2 uint64
	r := inContext(ctx, func() uintptr { r, a, b := callOuts(fn, outAt, 2, args); o1, o2 = a, b; return r })
	return r, o1, o2
}

func callOutsAtIn(ctx, fn uintptr, at0, at1 int, args ...uintptr) (uintptr, uint64, uint64) {
	var o1, o2 uint64
	r := inContext(ctx, func() uintptr {
		out := new([2]uint64)
		a := append([]uintptr(nil), args...)
		a[at0], a[at1] = uintptr(unsafe.Pointer(&out[0])), uintptr(unsafe.Pointer(&out[1]))
		r, _, _ := purego.SyscallN(fn, a...)
		runtime.KeepAlive(out)
		o1, o2 = out[0], out[1]
		return r
	})
	return r, o1, o2
}

func callOuts(fn uintptr, outAt, n int, args []uintptr) (uintptr, uint64, uint64) {
	out := new([2]uint64)
	a := append([]uintptr(nil), args...)
	for len(a) < outAt+n {
		a = append(a, 0)
	}
	for i := range n {
		a[outAt+i] = uintptr(unsafe.Pointer(&out[i]))
	}
	r, _, _ := purego.SyscallN(fn, a...)
	runtime.KeepAlive(out)
	return r, out[0], out[1]
}

func callPairIn(ctx, fn1, a1, a2, fn2, b1, b2, b3 uintptr) (uintptr, int) {
	calls := 1
	r := inContext(ctx, func() uintptr {
		if r := call(fn1, a1, a2); res(r) != 0 {
			return r
		}
		calls = 2
		return call(fn2, b1, b2, b3)
	})
	return r, calls
}

// Reading possibly unmapped memory with loads is done in assembly on amd64 only.
func load64(addr uintptr) uint64 { panic("cuda: load64 on this architecture") }

const canLoadUnmapped = false

// callReentrant is callOut (outAt < 0: no out-parameter) for a call during which the
// driver may call back into Go on this thread (see call_amd64.go): purego.SyscallN's
// arguments and callOuts' out-parameters are on the heap already.
func callReentrant(fn uintptr, outAt int, args ...uintptr) (uintptr, uint64) {
	if outAt < 0 {
		return call(fn, args...), 0
	}
	return callOut(fn, outAt, args...)
}

// callReentrantRelaxedIn is callReentrant relaxed, in ctx (relaxedIn).
func callReentrantRelaxedIn(ctx, fn uintptr, outAt int, args ...uintptr) (uintptr, uint64) {
	return relaxedIn(ctx, fn, outAt, args)
}

// callOutRelaxed is callOut relaxed (relaxedIn).
func callOutRelaxed(fn uintptr, outAt int, args ...uintptr) (uintptr, uint64) {
	return relaxedIn(0, fn, outAt, args)
}
