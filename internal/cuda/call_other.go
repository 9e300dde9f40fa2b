//go:build !amd64

package cuda

import (
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego"
)

// On other architectures calls go through purego.SyscallN; out-parameters live on the
// heap, where they cannot move.

func call(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}

func callOut(fn uintptr, outAt int, args ...uintptr) (uintptr, uint64) {
	out := new([2]uint64)
	a := append([]uintptr(nil), args...)
	for len(a) <= outAt {
		a = append(a, 0)
	}
	a[outAt] = uintptr(unsafe.Pointer(&out[0]))
	r, _, _ := purego.SyscallN(fn, a...)
	runtime.KeepAlive(out)
	return r, out[0]
}

func callOut2(fn uintptr, outAt int, args ...uintptr) (uintptr, uint64, uint64) {
	out := new([2]uint64)
	a := append([]uintptr(nil), args...)
	for len(a) <= outAt+1 {
		a = append(a, 0)
	}
	a[outAt] = uintptr(unsafe.Pointer(&out[0]))
	a[outAt+1] = uintptr(unsafe.Pointer(&out[1]))
	r, _, _ := purego.SyscallN(fn, a...)
	runtime.KeepAlive(out)
	return r, out[0], out[1]
}

func callPair(fn1, a1, a2, fn2, b1, b2, b3 uintptr) (uintptr, int) {
	if r := call(fn1, a1, a2); res(r) != 0 {
		return r, 1
	}
	return call(fn2, b1, b2, b3), 2
}
