package cuda

import (
	"fmt"
	"sync"
	"unsafe"

	_ "github.com/ebitengine/purego" // without cgo, purego's fakecgo lets runtime.cgocall work
)

// Calls into the driver go through runtime.cgocall, as cgo's and purego's do, with the
// arguments in a frame on the caller's stack. purego.SyscallN does the same through a
// sync.Pool and a 64-word copy, and its variadic arguments escape to the heap: about
// 150 ns and one allocation a call, measured against C on an H200. This path costs the
// cgocall alone and allocates nothing. The trampoline (call_amd64.s) can also make a
// context current around the call, and make a second call, inside the same crossing.

// frame is read and written by trampoline; its layout is fixed there.
type frame struct {
	fn    uintptr
	a     [11]uintptr
	r     uintptr
	out   [2]uint64 // out-parameters the driver writes
	ctx   uintptr   // if not 0, current for the call
	prev  uintptr   // the thread's context before
	fn2   uintptr   // if not 0, called with b after fn succeeded
	b     [3]uintptr
	calls uintptr // how many of fn, fn2 were called
	relax uintptr // if not 0, the thread's capture mode is relaxed around the calls
	mode  uint64  // the thread's capture mode before, while relaxed
}

var trampolineABI0 uintptr

// runtime.cgocall is nosplit: from the call on, the goroutine's stack cannot move, so the
// frame's address (and out's) stays valid while the driver runs.
//
//go:noescape
//go:linkname runtime_cgocall runtime.cgocall
func runtime_cgocall(fn uintptr, arg unsafe.Pointer) int32

// call calls fn with integer arguments, none of which may point into a Go stack (heap
// pointers kept alive by the caller are fine).
func call(fn uintptr, args ...uintptr) uintptr { return callIn(0, fn, args...) }

// callIn is call with context ctx current for the call (0: whatever is current).
func callIn(ctx, fn uintptr, args ...uintptr) uintptr {
	var f frame
	f.fn, f.ctx = fn, ctx
	f.args(args)
	runtime_cgocall(trampolineABI0, unsafe.Pointer(&f))
	return f.r
}

// callRelaxedIn is callIn with the calling thread's capture interaction mode relaxed
// for the call (cuThreadExchangeStreamCaptureMode before and after, in the same
// crossing): a query or a synchronize of a stream or event that a capture going on in
// another thread cannot involve then leaves that capture alone, where in the thread's
// own mode (global unless set) the driver refuses it and invalidates the capture.
func callRelaxedIn(ctx, fn uintptr, args ...uintptr) uintptr {
	var f frame
	f.fn, f.ctx, f.relax = fn, ctx, 1
	f.args(args)
	runtime_cgocall(trampolineABI0, unsafe.Pointer(&f))
	return f.r
}

// callOut calls fn with argument outAt (0-based) pointing to 8 bytes the driver writes,
// and returns the result and what was written.
func callOut(fn uintptr, outAt int, args ...uintptr) (uintptr, uint64) {
	var f frame
	f.fn = fn
	f.args(args)
	f.a[outAt] = uintptr(unsafe.Pointer(&f.out[0]))
	runtime_cgocall(trampolineABI0, unsafe.Pointer(&f))
	return f.r, f.out[0]
}

// callOutRelaxed is callOut with the thread's capture mode relaxed for the call, as
// callRelaxedIn's.
func callOutRelaxed(fn uintptr, outAt int, args ...uintptr) (uintptr, uint64) {
	var f frame
	f.fn, f.relax = fn, 1
	f.args(args)
	f.a[outAt] = uintptr(unsafe.Pointer(&f.out[0]))
	runtime_cgocall(trampolineABI0, unsafe.Pointer(&f))
	return f.r, f.out[0]
}

// callOutIn is callOut with context ctx current for the call.
func callOutIn(ctx, fn uintptr, outAt int, args ...uintptr) (uintptr, uint64) {
	var f frame
	f.fn, f.ctx = fn, ctx
	f.args(args)
	f.a[outAt] = uintptr(unsafe.Pointer(&f.out[0]))
	runtime_cgocall(trampolineABI0, unsafe.Pointer(&f))
	return f.r, f.out[0]
}

// callOut2In is callOutIn with two out-parameters, at outAt and outAt+1.
func callOut2In(ctx, fn uintptr, outAt int, args ...uintptr) (uintptr, uint64, uint64) {
	var f frame
	f.fn, f.ctx = fn, ctx
	f.args(args)
	f.a[outAt] = uintptr(unsafe.Pointer(&f.out[0]))
	f.a[outAt+1] = uintptr(unsafe.Pointer(&f.out[1]))
	runtime_cgocall(trampolineABI0, unsafe.Pointer(&f))
	return f.r, f.out[0], f.out[1]
}

// callOutsAtIn is callOut2In with its two out-parameters at at0 and at1.
func callOutsAtIn(ctx, fn uintptr, at0, at1 int, args ...uintptr) (uintptr, uint64, uint64) {
	var f frame
	f.fn, f.ctx = fn, ctx
	f.args(args)
	f.a[at0] = uintptr(unsafe.Pointer(&f.out[0]))
	f.a[at1] = uintptr(unsafe.Pointer(&f.out[1]))
	runtime_cgocall(trampolineABI0, unsafe.Pointer(&f))
	return f.r, f.out[0], f.out[1]
}

// callReentrant is callOut (outAt < 0: no out-parameter) for a call during which the
// driver may call back into Go on this thread: it runs the destructor of a user object
// inside the call that released the object's last reference (seen in cuStreamEndCapture
// on an H100). Go code there can grow, and so move, this goroutine's stack, and with it a
// frame on the stack: the driver's result was then written to the old stack and lost. So
// this frame is on the heap (from a pool: a heap object never moves).
func callReentrant(fn uintptr, outAt int, args ...uintptr) (uintptr, uint64) {
	return reentrant(0, false, fn, outAt, args)
}

// callReentrantRelaxedIn is callReentrant with context ctx current for the call and the
// thread's capture mode relaxed around it, as callRelaxedIn's.
func callReentrantRelaxedIn(ctx, fn uintptr, outAt int, args ...uintptr) (uintptr, uint64) {
	return reentrant(ctx, true, fn, outAt, args)
}

func reentrant(ctx uintptr, relax bool, fn uintptr, outAt int, args []uintptr) (uintptr, uint64) {
	f := heapFrames.Get().(*frame)
	defer heapFrames.Put(f)
	*f = frame{fn: fn, ctx: ctx}
	if relax {
		f.relax = 1
	}
	f.args(args)
	if outAt >= 0 {
		f.a[outAt] = uintptr(unsafe.Pointer(&f.out[0]))
	}
	runtime_cgocall(trampolineABI0, unsafe.Pointer(f))
	return f.r, f.out[0]
}

var heapFrames = sync.Pool{New: func() any { return new(frame) }}

// callPairIn calls fn1(a1, a2) and then, if that succeeded, fn2(b1, b2, b3), in one
// crossing, with ctx current. It returns the last result and which call (1 or 2) made it.
func callPairIn(ctx, fn1, a1, a2, fn2, b1, b2, b3 uintptr) (uintptr, int) {
	var f frame
	f.fn, f.ctx = fn1, ctx
	f.a[0], f.a[1] = a1, a2
	f.fn2, f.b = fn2, [3]uintptr{b1, b2, b3}
	runtime_cgocall(trampolineABI0, unsafe.Pointer(&f))
	return f.r, int(f.calls)
}

// load64 returns the word at addr, which may be unmapped (see reader in validate.go).
func load64(addr uintptr) uint64

const canLoadUnmapped = true

// args copies a call's arguments into the frame. More than it holds is a mistake in this
// package, refused as purego's SyscallN refuses it, rather than dropped.
func (f *frame) args(args []uintptr) {
	if len(args) > len(f.a) {
		panic(fmt.Sprintf("streambridge: internal error: a driver call with %d arguments; the call frame holds %d", len(args), len(f.a)))
	}
	copy(f.a[:], args)
}
