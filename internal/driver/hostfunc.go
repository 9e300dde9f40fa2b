package driver

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
)

// Host functions cross into the driver as one C entry point (purego's callback slots are
// few and never freed) and a userData key into this table. Both drivers call RunHostFunc.

type hostFunc struct {
	fn      func()
	persist bool // a graph node may run it many times; Release frees it
	next    uintptr
}

var hostFuncs struct {
	sync.Mutex
	slots  []hostFunc // slot 0 is unused so that no key is 0
	free   uintptr    // head of the free list, 0 when empty
	inside []uintptr  // the callers (caller()) running a host function now: a few at most
}

// running is len(hostFuncs.inside), read without the lock: 0 answers InHostFunc with one load.
var running atomic.Int64

// PanicHandler receives a panic recovered from a host function.
var panicHandler atomic.Pointer[func(error)]

// SetPanicHandler sets what receives panics recovered from host functions; nil restores
// the default, which prints them to standard error.
func SetPanicHandler(h func(error)) {
	if h == nil {
		panicHandler.Store(nil)
		return
	}
	panicHandler.Store(&h)
}

// HostFuncPanic is a panic recovered from a host function.
type HostFuncPanic struct {
	Value any
	Stack []byte
}

func (p *HostFuncPanic) Error() string {
	return fmt.Sprintf("streambridge: host function panicked: %v", p.Value)
}

// RegisterHostFunc stores fn and returns its key. A one-shot function is freed when it
// runs; a persistent one (captured into a graph) lives until ReleaseHostFunc.
func RegisterHostFunc(fn func(), persist bool) uintptr {
	hostFuncs.Lock()
	defer hostFuncs.Unlock()
	if len(hostFuncs.slots) == 0 {
		hostFuncs.slots = append(hostFuncs.slots, hostFunc{})
	}
	key := hostFuncs.free
	if key != 0 {
		hostFuncs.free = hostFuncs.slots[key].next
		hostFuncs.slots[key] = hostFunc{fn: fn, persist: persist}
		return key
	}
	hostFuncs.slots = append(hostFuncs.slots, hostFunc{fn: fn, persist: persist})
	return uintptr(len(hostFuncs.slots) - 1)
}

// ReleaseHostFunc frees key.
func ReleaseHostFunc(key uintptr) {
	hostFuncs.Lock()
	defer hostFuncs.Unlock()
	release(key)
}

func release(key uintptr) {
	if key == 0 || key >= uintptr(len(hostFuncs.slots)) || hostFuncs.slots[key].fn == nil {
		return
	}
	hostFuncs.slots[key] = hostFunc{next: hostFuncs.free}
	hostFuncs.free = key
}

// LiveHostFuncKinds counts registered functions not yet freed by kind: those that run once
// (launched on a stream, freed when run) and those a graph node keeps (freed with it).
func LiveHostFuncKinds() (once, kept int) {
	hostFuncs.Lock()
	defer hostFuncs.Unlock()
	for _, s := range hostFuncs.slots {
		switch {
		case s.fn == nil:
		case s.persist:
			kept++
		default:
			once++
		}
	}
	return once, kept
}

// LiveHostFuncs counts registered functions not yet freed.
func LiveHostFuncs() int {
	hostFuncs.Lock()
	defer hostFuncs.Unlock()
	n := 0
	for _, s := range hostFuncs.slots {
		if s.fn != nil {
			n++
		}
	}
	return n
}

// RunHostFunc runs the function stored under key, on whatever thread the driver calls
// from. A panic is recovered and handed to the panic handler: it must not unwind into the
// driver's thread.
//
// A function that ends its goroutine (runtime.Goexit; t.FailNow, t.Fatal and t.SkipNow
// do) ends the process: on the real driver's thread, which Go did not make, Go allows no
// Goexit, and the stream could not go on without that thread. The software driver's
// thread ends the process the same way, rather than leave the stream hanging. It is
// reported to the panic handler (ErrGoexit) and to standard error first. Running each
// function on a goroutine of its own would survive it, at two thread wakes per host
// function (2.3 to 3.8 times the latency on an H100, see bench/RESULTS.md).
func RunHostFunc(key uintptr) {
	runtime.LockOSThread() // where caller is the thread, no other goroutine runs on it meanwhile
	defer runtime.UnlockOSThread()
	id := caller()
	hostFuncs.Lock()
	var fn func()
	if key < uintptr(len(hostFuncs.slots)) {
		s := hostFuncs.slots[key]
		fn = s.fn
		if fn != nil && !s.persist {
			release(key)
		}
	}
	if fn != nil {
		hostFuncs.inside = append(hostFuncs.inside, id)
		running.Add(1)
	}
	hostFuncs.Unlock()
	if fn == nil {
		reportPanic(&HostFuncPanic{Value: fmt.Sprintf("no host function under key %d", key)})
		return
	}
	returned := false
	defer func() {
		leaveHostFunc(id)
		if v := recover(); v != nil {
			reportPanic(&HostFuncPanic{Value: v, Stack: debug.Stack()})
		} else if !returned {
			p := &HostFuncPanic{Value: ErrGoexit, Stack: debug.Stack()}
			reportPanic(p)
			fmt.Fprintf(os.Stderr, "%v\n%s", p, p.Stack)
			os.Exit(GoexitExitCode)
		}
	}()
	fn()
	returned = true
}

// ErrGoexit is reported to the panic handler when a host function ends its goroutine with
// runtime.Goexit (see RunHostFunc).
var ErrGoexit = errors.New("streambridge: host function called runtime.Goexit (t.FailNow, t.Fatal and t.SkipNow do) on the driver's thread, " +
	"which Go allows no Goexit: the process ends (fail a test from the goroutine that runs it, after Synchronize)")

// GoexitExitCode is the status the process ends with when a host function calls
// runtime.Goexit (Go's own for a fatal error).
const GoexitExitCode = 2

// leaveHostFunc takes id's entry off the list of callers inside a host function.
func leaveHostFunc(id uintptr) {
	hostFuncs.Lock()
	defer hostFuncs.Unlock()
	in := hostFuncs.inside
	for i, c := range in {
		if c == id {
			in[i] = in[len(in)-1]
			hostFuncs.inside = in[:len(in)-1]
			break
		}
	}
	running.Add(-1)
}

// InHostFunc reports whether the calling goroutine runs inside a host function, where
// CUDA forbids every CUDA call: the driver runs host functions one at a time, so a wait
// there for work behind another host function (or behind itself) never returns. While no
// host function runs anywhere it costs one atomic load, inlined where it is called.
// (HostFuncRuns' load is written out here: a call to it takes callers over the inline budget.)
func InHostFunc() bool { return running.Load() != 0 && inHostFuncNow() }

// HostFuncRuns reports whether a host function runs anywhere now: one atomic load. Where
// it reports false, InHostFunc does too.
func HostFuncRuns() bool { return running.Load() != 0 }

// inHostFuncNow is InHostFunc while some host function runs: is it this goroutine's?
func inHostFuncNow() bool {
	id := caller()
	hostFuncs.Lock()
	defer hostFuncs.Unlock()
	return slices.Contains(hostFuncs.inside, id)
}

func reportPanic(p *HostFuncPanic) {
	if h := panicHandler.Load(); h != nil {
		(*h)(p)
		return
	}
	println(p.Error())
}
