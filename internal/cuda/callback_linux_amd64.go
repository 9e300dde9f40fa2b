package cuda

import (
	"fmt"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/streambridge/streambridge/internal/driver"
)

// Host functions run on the driver's own thread, which Go did not make; the driver calls
// hostFuncEntry (callback_linux_amd64.s), which enters Go through crosscall2 as a cgo export
// does, with no reflection (purego's callbacks call through reflect.Value.Call).
//
// Each time such a thread enters Go, the runtime lends it an M (needm) and takes it back on
// return (dropm), with signal-mask system calls both ways: a third of a burst of Go host
// functions on an H100 (bench/RESULTS.md, 2026-11-26). runtime/cgo binds the M to the
// thread instead, until the thread exits, through a pthread key whose destructor gives the
// M back (golang/go#51676), but it creates that key only on the way into a cgo export,
// which neither this entry nor purego's callbacks take, and purego's stand-in for
// runtime/cgo, used without cgo, never creates it. bindCallbackThreads creates the key and
// hands the runtime the two entry points runtime/cgo has for it, once, before the first
// host function: with cgo and without.

var (
	hostFuncEntryABI0, bindmABI0, keyDestructorABI0 uintptr // callback_linux_amd64.s
	threadKey                                       uintptr // the pthread_key_t; read by bindm
	pthreadSetspecific                              uintptr // read by bindm

	// runHostFuncCall is what hostFuncEntry calls, as a func value.
	runHostFuncCall = runHostFuncFrame
)

// runHostFuncFrame runs the host function whose key is frame's one word.
func runHostFuncFrame(frame unsafe.Pointer) { driver.RunHostFunc(*(*uintptr)(frame)) }

// hostFuncEntry is the CUhostFn of every host function.
func hostFuncEntry() uintptr { return hostFuncEntryABI0 }

//go:linkname runtimeKeyCreated _cgo_pthread_key_created
var runtimeKeyCreated unsafe.Pointer // *uintptr: not 0 once the key exists

//go:linkname runtimeBindm _cgo_bindm
var runtimeBindm unsafe.Pointer // called with g0 on a thread's first entry into Go

func bindCallbackThreads() error {
	if runtimeKeyCreated == nil || *(*uintptr)(runtimeKeyCreated) != 0 {
		return nil // without a C runtime, or bound already (by runtime/cgo, or earlier)
	}
	create, err := purego.Dlsym(purego.RTLD_DEFAULT, "pthread_key_create")
	if err != nil {
		return err
	}
	if pthreadSetspecific, err = purego.Dlsym(purego.RTLD_DEFAULT, "pthread_setspecific"); err != nil {
		return err
	}
	key := new(uint32) // pthread_key_t, on the heap: the call writes it
	if r := call(create, uintptr(unsafe.Pointer(key)), keyDestructorABI0); r != 0 {
		return fmt.Errorf("pthread_key_create: error %d", r)
	}
	threadKey = uintptr(*key)
	runtimeBindm = *(*unsafe.Pointer)(unsafe.Pointer(&bindmABI0)) // a C function's address, not Go memory
	*(*uintptr)(runtimeKeyCreated) = 1
	return nil
}
