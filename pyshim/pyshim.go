// Package pyshim is the Go package gopy exports to Python as streambridge's native module.
// Its functions take and return plain integers, so that each Python operation is one
// crossing into Go; streams live in a table here, named to Python by integer keys.
//
// Errors reach Python as "kind|code|message" (see errorf), which the hand-written package
// (python/streambridge/_errors.py) turns into typed exceptions.
//
// gopy's generated code releases the GIL around every call, which costs two more crossings
// than a cuStreamQuery takes. Functions marked //streambridge:keepgil keep it
// (scripts/gopy-fixups.py edits the generated code): they never block, never call back
// into Python, enqueue nothing (a full launch queue can block an enqueue while a host
// callback waits for the GIL), and take nanoseconds to microseconds. The others
// (synchronize, create, record, wait, launch, first use of the driver) release it.
package pyshim

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ebitengine/purego"

	"github.com/streambridge/streambridge/bridge"
	"github.com/streambridge/streambridge/internal/cuda"
	"github.com/streambridge/streambridge/streams"
)

var (
	mu      sync.RWMutex
	table   = map[int64]any{} // *streams.Stream and *streams.Event, by key
	nextKey int64
)

// driver is the process's bridge, shared with Go packages built into the same extension.
func driver() (*bridge.Bridge, error) {
	b, err := bridge.Default()
	return b, errorf(err)
}

// errorf encodes err as "kind|code|message" for Python (bridge.PythonError, and "capture"
// for a call refused during capture); nil stays nil.
func errorf(err error) error {
	if errors.Is(err, errCapture) {
		return fmt.Errorf("capture|0|%s", err.Error())
	}
	return bridge.PythonError(err)
}

// errCapture marks a call refused because the stream is capturing.
var errCapture = errors.New("not allowed during capture")

// done is the (true, nil) or (false, err) of a call with nothing else to return. No
// exported function returns only an error: for those gopy v0.5.0 returns a C string it
// never frees (32 bytes a call, seen in bench/memory.py).
func done(err error) (bool, error) { return err == nil, err }

func store(obj any) int64 {
	mu.Lock()
	defer mu.Unlock()
	nextKey++
	table[nextKey] = obj
	return nextKey
}

func find[T any](key int64) (T, error) {
	mu.RLock()
	obj, ok := table[key].(T)
	mu.RUnlock()
	if !ok {
		return obj, errorf(streams.ErrClosed)
	}
	return obj, nil
}

func lookup(key int64) (*streams.Stream, error) { return find[*streams.Stream](key) }

// call1 is the one shape of a call on one object: fn on the object under key, its error
// encoded for Python. Method expressions ((*streams.Stream).Query) make most of them.
func call1[T, R any](key int64, fn func(T) (R, error)) (R, error) {
	obj, err := find[T](key)
	if err != nil {
		var zero R
		return zero, err
	}
	r, err := fn(obj)
	return r, errorf(err)
}

// act2 is the shape of a call on two objects with nothing to return.
func act2[A, B any](a, b int64, fn func(A, B) error) (bool, error) {
	x, y, err := both[A, B](a, b)
	if err != nil {
		return false, err
	}
	return done(errorf(fn(x, y)))
}

// context is the primary context of device, retained by the bridge for the process:
// what the package creates lives in it.
func context(device int) (*streams.Context, error) {
	b, err := driver()
	if err != nil {
		return nil, err
	}
	c, err := b.Context(device)
	return c, errorf(err)
}

// both finds the objects under two keys.
func both[A, B any](a, b int64) (A, B, error) {
	x, err := find[A](a)
	if err != nil {
		var y B
		return x, y, err
	}
	y, err := find[B](b)
	return x, y, err
}

// Setenv sets an environment variable as Go sees it. Go in an extension module reads the
// environment the process started with, so Python's os.environ changes made before the
// package was imported reach Go through this (python/streambridge/_core.py).
//
//streambridge:keepgil
func Setenv(name, value string) (bool, error) { return done(os.Setenv(name, value)) }

// DriverName is the driver in use ("cuda" or "sim"); the error says why there is none.
func DriverName() (string, error) {
	b, err := driver()
	if err != nil {
		return "", err
	}
	return b.Driver().Name(), nil
}

// WrapStream validates a foreign stream handle and returns its key. device is the stated
// device or -1; convention is 0 for the runtime reading of 0/1/2, 1 for the CUDA Array
// Interface and DLPack reading.
//
//streambridge:keepgil
func WrapStream(handle uint64, device int, convention int) (int64, error) {
	s, err := resolve(handle, device, convention)
	if err != nil {
		return 0, err
	}
	return store(s), nil
}

// resolve is the bridge's reading of a handle under the Python package's arguments.
func resolve(handle uint64, device, convention int) (*streams.Stream, error) {
	b, err := driver()
	if err != nil {
		return nil, err
	}
	s, err := b.Stream(handle, bridge.Options{Device: device, Convention: bridge.Convention(convention)})
	return s, errorf(err)
}

// CheckStream validates a foreign stream handle as WrapStream does and returns its device,
// keeping nothing: the Python package checks each borrowed handle when it is wrapped, and
// wraps it (WrapStream, which checks it again) only for a call that goes through Go.
//
//streambridge:keepgil
func CheckStream(handle uint64, device int, convention int) (int, error) {
	b, err := driver()
	if err != nil {
		return 0, err
	}
	dev, err := b.Device(handle, bridge.Options{Device: device, Convention: bridge.Convention(convention)})
	if err != nil {
		return 0, errorf(err)
	}
	return dev.Ordinal(), nil
}

// NewStream creates a stream on device and returns its key; closing the key destroys it.
func NewStream(device int, nonBlocking bool, priority int) (int64, error) {
	c, err := context(device)
	if err != nil {
		return 0, err
	}
	s, err := c.NewStream(streams.StreamOptions{NonBlocking: nonBlocking, Priority: priority})
	if err != nil {
		return 0, errorf(err)
	}
	return store(s), nil
}

// StreamHandle is the CUstream of key.
//
//streambridge:keepgil
func StreamHandle(key int64) (uint64, error) {
	return call1(key, func(s *streams.Stream) (uint64, error) { return uint64(s.Handle()), nil })
}

// StreamDevice is the device ordinal of key.
//
//streambridge:keepgil
func StreamDevice(key int64) (int, error) {
	return call1(key, func(s *streams.Stream) (int, error) { return s.Device().Ordinal(), nil })
}

// StreamQuery reports whether key's work has completed (cuStreamQuery).
//
//streambridge:keepgil
func StreamQuery(key int64) (bool, error) { return call1(key, (*streams.Stream).Query) }

// StreamSynchronize waits for key's work (cuStreamSynchronize). The Python package refuses
// it while the stream is capturing, which the driver would invalidate (Go's
// Stream.Synchronize passes the driver's answer on: ErrCaptureUnsupported, capture lost).
func StreamSynchronize(key int64) (bool, error) {
	return call1(key, func(s *streams.Stream) (bool, error) {
		if capturing, err := s.IsCapturing(); err == nil && capturing {
			return false, fmt.Errorf("%w: the stream is capturing; synchronizing it would invalidate the capture", errCapture)
		}
		return done(s.Synchronize())
	})
}

// StreamWaitStream makes waiter wait for producer's work so far: one crossing.
func StreamWaitStream(waiter, producer int64) (bool, error) {
	return act2(waiter, producer, (*streams.Stream).WaitStream)
}

// StreamPriority is cuStreamGetPriority of key.
//
//streambridge:keepgil
func StreamPriority(key int64) (int, error) { return call1(key, (*streams.Stream).Priority) }

// StreamNonBlocking reports whether key was created non-blocking.
//
//streambridge:keepgil
func StreamNonBlocking(key int64) (bool, error) {
	return call1(key, (*streams.Stream).NonBlocking)
}

// NewEvent creates an event on device and returns its key.
func NewEvent(device int, blockingSync, disableTiming, interprocess bool) (int64, error) {
	c, err := context(device)
	if err != nil {
		return 0, err
	}
	e, err := c.NewEvent(streams.EventOptions{BlockingSync: blockingSync, DisableTiming: disableTiming, Interprocess: interprocess})
	if err != nil {
		return 0, errorf(err)
	}
	return store(e), nil
}

// EventRecord records event key e on stream key s (cuEventRecord).
func EventRecord(e, s int64) (bool, error) { return act2(s, e, (*streams.Stream).Record) }

// StreamWaitEvent makes stream key s wait for event key e (cuStreamWaitEvent).
func StreamWaitEvent(s, e int64) (bool, error) { return act2(s, e, (*streams.Stream).WaitEvent) }

// EventQuery reports whether event key e has completed (cuEventQuery).
//
//streambridge:keepgil
func EventQuery(e int64) (bool, error) { return call1(e, (*streams.Event).Query) }

// EventSynchronize waits for event key e (cuEventSynchronize).
func EventSynchronize(e int64) (bool, error) {
	return call1(e, func(ev *streams.Event) (bool, error) { return done(ev.Synchronize()) })
}

// EventElapsedTime is the milliseconds from start's completion to end's
// (cuEventElapsedTime).
//
//streambridge:keepgil
func EventElapsedTime(start, end int64) (float64, error) {
	a, b, err := both[*streams.Event, *streams.Event](start, end)
	if err != nil {
		return 0, err
	}
	d, err := a.ElapsedTime(b)
	return float64(d.Nanoseconds()) / 1e6, errorf(err)
}

// EventIPCHandle exports interprocess event key e (cuIpcGetEventHandle), as hex.
func EventIPCHandle(e int64) (string, error) {
	return call1(e, func(ev *streams.Event) (string, error) {
		h, err := ev.IPCHandle()
		return hex.EncodeToString(h[:]), err
	})
}

// OpenIPCEvent opens an event another process exported (cuIpcOpenEventHandle) on device
// and returns its key. The driver refuses a handle from this same process.
func OpenIPCEvent(device int, handle string) (int64, error) {
	var h streams.IPCEventHandle
	raw, err := hex.DecodeString(handle)
	if err != nil || len(raw) != len(h) {
		return 0, errorf(fmt.Errorf("%w: an event IPC handle is %d bytes", bridge.ErrValue, len(h)))
	}
	copy(h[:], raw)
	c, err := context(device)
	if err != nil {
		return 0, err
	}
	ev, err := c.OpenIPCEvent(h)
	if err != nil {
		return 0, errorf(err)
	}
	return store(ev), nil
}

// Close forgets key, destroying the stream or event if streambridge created it; false if
// key was not open.
//
//streambridge:keepgil
func Close(key int64) (bool, error) {
	mu.Lock()
	obj, ok := table[key]
	delete(table, key)
	mu.Unlock()
	if !ok {
		return false, nil
	}
	if c, ok := obj.(interface{ Close() error }); ok {
		return done(errorf(c.Close()))
	}
	return true, nil // a kernel: its module owns it
}

// LiveStreams counts the keys (streams and events) not yet closed.
//
//streambridge:keepgil
func LiveStreams() int {
	mu.RLock()
	defer mu.RUnlock()
	return len(table)
}

// Entry is the address of the C function for a cuda.h entry point the Python package calls
// without crossing into Go (see streams.Driver.Entry and python/native/fastcall.c); 0 for
// one not offered.
func Entry(name string) (uint64, error) {
	b, err := driver()
	if err != nil {
		return 0, err
	}
	return uint64(b.Driver().Entry(name)), nil
}

// StreamLaunchCFunc enqueues the C function fn(userData) on stream key s, after the work
// submitted so far, through the Go core's host functions (cuLaunchHostFunc); the Python
// package passes its trampoline into Python (python/native/fastcall.c). Refused during
// capture: such a call runs once and frees itself, and a graph would replay it.
func StreamLaunchCFunc(key int64, fn, userData uint64) (bool, error) {
	s, err := lookup(key)
	if err != nil {
		return false, err
	}
	capturing, err := s.IsCapturing()
	if err != nil {
		return false, errorf(err)
	}
	if capturing {
		return false, errorf(fmt.Errorf("%w: a Python host callback cannot be captured into a graph (it would run once and be freed)", bridge.ErrValue))
	}
	return done(errorf(s.LaunchHostFunc(func() { purego.SyscallN(uintptr(fn), uintptr(userData)) })))
}

// StreamBeginCapture starts capturing stream key s (cuStreamBeginCapture); mode is 0
// global, 1 thread-local, 2 relaxed.
func StreamBeginCapture(key int64, mode int) (bool, error) {
	return call1(key, func(s *streams.Stream) (bool, error) { return done(s.BeginCapture(streams.CaptureMode(mode))) })
}

// StreamEndCapture ends the capture and instantiates the graph (cuStreamEndCapture,
// cuGraphInstantiateWithFlags); it returns the executable graph's key. The graph itself
// is released with it.
func StreamEndCapture(key int64) (int64, error) {
	s, err := lookup(key)
	if err != nil {
		return 0, err
	}
	g, err := s.EndCapture()
	if err != nil {
		return 0, errorf(err)
	}
	defer g.Close() // the executable keeps what it needs
	e, err := g.Instantiate()
	if err != nil {
		return 0, errorf(err)
	}
	return store(e), nil
}

// StreamIsCapturing reports whether stream key s is capturing (cuStreamIsCapturing).
//
//streambridge:keepgil
func StreamIsCapturing(key int64) (bool, error) { return call1(key, (*streams.Stream).IsCapturing) }

// GraphLaunch launches executable graph key g on stream key s (cuGraphLaunch).
func GraphLaunch(g, s int64) (bool, error) { return act2(g, s, (*streams.GraphExec).Launch) }

// GraphUpload prepares executable graph key g on stream key s (cuGraphUpload).
func GraphUpload(g, s int64) (bool, error) { return act2(g, s, (*streams.GraphExec).Upload) }

// CompileModule compiles CUDA C++ with NVRTC for device (or arch, where not empty) and
// loads it there; it returns the module's key. options and nameExpressions are lists
// separated by newlines; ptx asks for PTX rather than a cubin. A failed compile's error
// carries the compiler's whole log.
func CompileModule(device int, source, name, arch, options, nameExpressions string, ptx bool) (int64, error) {
	c, err := context(device)
	if err != nil {
		return 0, err
	}
	m, err := c.Compile(source, streams.CompileOptions{
		Arch: arch, PTX: ptx, Name: name, Options: lines(options), NameExpressions: lines(nameExpressions),
	})
	if err != nil {
		return 0, errorf(err)
	}
	return store(m), nil
}

func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// ModuleFunction looks a kernel up in module key m by name or name expression and
// returns its key.
func ModuleFunction(m int64, name string) (int64, error) {
	return call1(m, func(mod *streams.Module) (int64, error) {
		f, err := mod.Function(name)
		if err != nil {
			return 0, err
		}
		return store(f), nil
	})
}

// FunctionHandle is the CUfunction of kernel key f.
//
//streambridge:keepgil
func FunctionHandle(f int64) (uint64, error) {
	return call1(f, func(fn *streams.Function) (uint64, error) { return uint64(fn.Handle()), nil })
}

// LaunchKernel launches kernel key f on stream key s (cuLaunchKernel). args are the
// kernel's parameters, each a value of up to 8 bytes (little-endian in a uint64), as
// decimal numbers separated by commas.
func LaunchKernel(f, s int64, gx, gy, gz, bx, by, bz, shared int, args string) (bool, error) {
	fn, st, err := both[*streams.Function, *streams.Stream](f, s)
	if err != nil {
		return false, err
	}
	var a streams.Args
	if args != "" {
		for _, v := range strings.Split(args, ",") {
			u, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return false, errorf(fmt.Errorf("%w: kernel argument %q", bridge.ErrValue, v))
			}
			a.Uint64(u)
		}
	}
	dim := func(v int) uint32 { return uint32(max(v, 1)) }
	cfg := streams.LaunchConfig{
		Grid:      streams.Dim3{X: dim(gx), Y: dim(gy), Z: dim(gz)},
		Block:     streams.Dim3{X: dim(bx), Y: dim(by), Z: dim(bz)},
		SharedMem: uint32(shared),
	}
	return done(errorf(fn.Launch(st, cfg, &a)))
}

// StreamFence is the CUevent stream key s records for others to wait on (see
// streams.Stream.WaitStream), made in the stream's context on first use and kept by it.
//
//streambridge:keepgil
func StreamFence(key int64) (uint64, error) {
	return call1(key, func(s *streams.Stream) (uint64, error) {
		e, err := s.Fence()
		if err != nil {
			return 0, err
		}
		return uint64(e.Handle()), nil
	})
}

// EventHandle is the CUevent of event key e.
//
//streambridge:keepgil
func EventHandle(e int64) (uint64, error) {
	return call1(e, func(ev *streams.Event) (uint64, error) { return uint64(ev.Handle()), nil })
}

// ResultName is the CUDA_ERROR_* name of a CUresult.
//
//streambridge:keepgil
func ResultName(code int) string { return streams.Result(code).Name() }

// ValidationReads says how handle checks read memory now: "loads" (Go's SIGSEGV handler
// is installed; fast) or "process_vm_readv" (another handler is, such as faulthandler's).
//
//streambridge:keepgil
func ValidationReads() string { return cuda.ValidationReads() }

// TimeCheckStream runs CheckStream n times inside Go and returns the mean ns: with Nop,
// bench/python_bench.py splits a wrap's cost between the crossing and Go.
func TimeCheckStream(handle uint64, n int) (float64, error) {
	start := time.Now()
	for range n {
		if _, err := CheckStream(handle, -1, 0); err != nil {
			return 0, err
		}
	}
	return float64(time.Since(start).Nanoseconds()) / float64(n), nil
}

// Nop does nothing: bench/python_bench.py times it to measure the cost of one call from
// Python into Go (gopy's generated layer and the cgo crossing).
//
//streambridge:keepgil
func Nop() {}
