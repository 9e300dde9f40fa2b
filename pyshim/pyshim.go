// Package pyshim is the Python module's Go side: the Go package gopy exports to Python as
// streambridge's native module, and nothing for Go callers (its functions hand out keys and
// raw entry points, and none writes to an address it is passed). Its functions take and
// return plain integers, so that each Python operation is one
// crossing into Go; streams, graphs, modules and kernels live in a table here,
// named to Python by integer keys, each key usable only as the kind of object it was made
// for. The frequent operations on them do not come here: the C core (python/native/core.c)
// calls the driver's entry points (Entry) itself.
//
// An error reaches Python as the exception of its kind (bridge.DescribeForPython), raised
// by gopy's generated error path, which scripts/gopy-fixups.py routes to core.c's sb_raise.
//
// gopy's generated code releases the GIL around every call, which costs two more crossings
// than a cuStreamQuery takes. Functions marked //streambridge:keepgil keep it
// (scripts/gopy-fixups.py edits the generated code): they never block, not even behind a
// host callback (bench/callback_waits.c lists the driver calls that do), never call
// back into Python, enqueue nothing (a record waits for room on a stream held up by a host
// callback that waits for the GIL: bench/queue_depth.c), create or destroy no stream or
// event (those wait while another thread's cuModuleLoadData or cuMemFree synchronizes the
// context: part three of that probe) but with the GIL let go (the handle checks' layout
// learning and sentinel events: LetGoAroundWaits), take no lock whose holder may wait for
// such a callback (the capture lock, held whole by an enqueue of the C core's during a
// capture: MAY_WAIT), and take nanoseconds to microseconds. The others
// (synchronize, create, destroy, capture, a module's close, first use of the driver)
// release it.
package pyshim

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/streambridge/streambridge/bridge"
	"github.com/streambridge/streambridge/internal/boundary"
	"github.com/streambridge/streambridge/internal/cuda"
	driverapi "github.com/streambridge/streambridge/internal/driver"
	"github.com/streambridge/streambridge/internal/plumbing"
	"github.com/streambridge/streambridge/streams"
)

var (
	mu      sync.RWMutex
	table   = map[int64]keyed{}
	nextKey int64
)

// keyed is an object under a key, with the kind the key was made for. A key of the
// per-thread default stream (handle 2) means, to Python as to CUDA, the calling thread's:
// a Go wrapper of 2 is one thread's (streams.Context.WrapStream), so the key keeps one
// for each Python thread that used it (perThread), all closed with the key.
type keyed struct {
	kind    boundary.ObjectKind
	obj     any
	threads map[int32]*streams.Stream
}

// driver is the process's bridge, shared with Go packages built into the same extension.
func driver() (*bridge.Bridge, error) { return bridge.Default() }

// done is the (true, nil) or (false, err) of a call with nothing else to return. No
// exported function returns only an error: for those gopy v0.5.0 returns a C string it
// never frees (32 bytes a call, seen in bench/memory.py).
func done(err error) (bool, error) { return err == nil, err }

func store(kind boundary.ObjectKind, obj any) int64 {
	mu.Lock()
	defer mu.Unlock()
	nextKey++
	table[nextKey] = keyed{kind: kind, obj: obj}
	return nextKey
}

// kindOf is the kind of object a Go type is kept as.
func kindOf(obj any) boundary.ObjectKind {
	switch obj.(type) {
	case *streams.Stream:
		return boundary.ObjectStream
	case *streams.GraphExec:
		return boundary.ObjectGraph
	case *streams.Module:
		return boundary.ObjectModule
	case *streams.Function:
		return boundary.ObjectKernel
	}
	return 0
}

// find is the object under key, which must be of type T: a key of another kind is a type
// error, and a key not (or no longer) in the table, such as 0, a closed object.
func find[T any](key int64) (T, error) {
	var zero T
	mu.RLock()
	k, ok := table[key]
	mu.RUnlock()
	if !ok {
		return zero, fmt.Errorf("%w: this %s", streams.ErrClosed, kindOf(zero).Name())
	}
	obj, ok := k.obj.(T)
	if !ok {
		return zero, fmt.Errorf("%w: key %d is a %s, not a %s", bridge.ErrType, key, k.kind.Name(), kindOf(zero).Name())
	}
	if s, ok := k.obj.(*streams.Stream); ok && s.Handle() == streams.PerThreadStream {
		t, err := perThread(key, s)
		if err != nil {
			return zero, err
		}
		return any(t).(T), nil
	}
	return obj, nil
}

// perThread is key's wrapper of the per-thread default stream for the calling thread (a
// Python thread: a call from Python runs on it, locked there), made on the thread's first
// use of the key.
func perThread(key int64, s *streams.Stream) (*streams.Stream, error) {
	tid := int32(syscall.Gettid())
	mu.RLock()
	t := table[key].threads[tid]
	mu.RUnlock()
	if t != nil {
		return t, nil
	}
	t, err := s.Context().WrapStream(streams.PerThreadStream)
	if err != nil {
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	k, ok := table[key]
	if !ok { // closed meanwhile
		t.Close()
		return nil, fmt.Errorf("%w: this stream", streams.ErrClosed)
	}
	if k.threads == nil {
		k.threads = map[int32]*streams.Stream{}
		table[key] = k
	}
	k.threads[tid] = t
	return t, nil
}

// call1 is the one shape of a call on one object: fn on the object under key. Method
// expressions ((*streams.Stream).Priority) make most of them.
func call1[T, R any](key int64, fn func(T) (R, error)) (R, error) {
	obj, err := find[T](key)
	if err != nil {
		var zero R
		return zero, err
	}
	return fn(obj)
}

// act2 is the shape of a call on two objects with nothing to return.
func act2[A, B any](a, b int64, fn func(A, B) error) (bool, error) {
	x, err := find[A](a)
	if err != nil {
		return false, err
	}
	y, err := find[B](b)
	if err != nil {
		return false, err
	}
	return done(fn(x, y))
}

// context is the primary context of device, retained by the bridge for the process:
// what the package creates lives in it.
func context(device int) (*streams.Context, error) {
	b, err := driver()
	if err != nil {
		return nil, err
	}
	return b.Context(device)
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

// HandleProof says how foreign stream handles are proven live on the driver in use, and
// why (streams.Driver.HandleProof), for python -m streambridge.
func HandleProof() (string, error) {
	b, err := driver()
	if err != nil {
		return "", err
	}
	proven, why, err := b.Driver().HandleProof()
	if err != nil {
		return "", err
	}
	if proven {
		return "proven live before use (" + why + ")", nil
	}
	return "not provable (" + why + "): a bare handle is refused; a framework's own stream object, " +
		"and as_stream(obj, vouched=True) or ExternalStream(ptr, vouched=True), are taken on their word", nil
}

// WrapStream validates a foreign stream handle and returns its key. device is the stated
// device or -1; convention is boundary.ConventionRuntime or ConventionArrayInterface;
// vouched takes the handle on the caller's word where it cannot be proven (bridge.Options).
//
//streambridge:keepgil
func WrapStream(handle uint64, device int, convention int, vouched bool) (int64, error) {
	b, err := driver()
	if err != nil {
		return 0, err
	}
	s, err := b.Stream(uintptr(handle), bridge.Options{Device: bridge.OnDevice(device), Convention: bridge.Convention(convention),
		Vouched: vouched})
	if err != nil {
		return 0, err
	}
	return store(boundary.ObjectStream, s), nil
}

// CheckStream validates a foreign stream handle as WrapStream does, keeping nothing, and
// returns its device and identity as "device id" (the value of cuStreamGetId, read by the
// check; 0 for the special handles, and for a vouched handle that could not be proven).
// The C core checks each borrowed handle so when it is wrapped, and verifies the identity
// before every use (VerifyStream). Answers are returned, never written to an address a
// caller passes: these exports are reachable from Python too.
//
//streambridge:keepgil
func CheckStream(handle uint64, device int, convention int, vouched bool) (string, error) {
	b, err := driver()
	if err != nil {
		return "", err
	}
	dev, id, err := b.Identity(uintptr(handle), bridge.Options{Device: bridge.OnDevice(device), Convention: bridge.Convention(convention),
		Vouched: vouched})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d %d", dev.Ordinal(), id), nil
}

// VerifyStream checks that a borrowed handle is still the live stream of identity id (see
// streams.Driver.VerifyStream): a destroyed stream, also one whose address now names a new
// stream, is an InvalidHandleError before the driver sees it. The C core calls it before
// every use of a borrowed stream object.
//
//streambridge:keepgil
func VerifyStream(handle, id uint64) (bool, error) {
	b, err := driver()
	if err != nil {
		return false, err
	}
	return done(b.Driver().VerifyStream(uintptr(handle), id))
}

// CheckEvent proves a foreign event handle live (streams.Driver.EventIdentity), keeping
// nothing, and returns its device and identity as "device id"; where device is not -1 the
// event must be on it. The C core checks a borrowed event so when it is wrapped
// (Event.from_handle) and verifies the identity before every use (VerifyEvent). vouched:
// where the driver's layout cannot be learned, the handle is taken on the word of whoever
// made the wrapper (streams.Vouched), on the stated device, or else the current context's,
// with boundary.VouchedEventID.
//
//streambridge:keepgil
func CheckEvent(handle uint64, device int, vouched bool) (string, error) {
	b, err := driver()
	if err != nil {
		return "", err
	}
	var opts []streams.WrapOption
	if vouched {
		opts = append(opts, streams.VouchedOn(device))
	}
	dev, id, err := b.Driver().EventIdentity(uintptr(handle), opts...)
	if err != nil {
		return "", err
	}
	if device >= 0 && device != dev.Ordinal() {
		return "", &bridge.DeviceMismatchError{Handle: uintptr(handle), Stated: device, Actual: dev.Ordinal(), Event: true}
	}
	return fmt.Sprintf("%d %d", dev.Ordinal(), id), nil
}

// VerifyEvent checks that a borrowed event handle is still the live event of identity id
// (streams.Driver.VerifyEvent), before the driver sees it.
//
//streambridge:keepgil
func VerifyEvent(handle, id uint64) (bool, error) {
	b, err := driver()
	if err != nil {
		return false, err
	}
	return done(b.Driver().VerifyEvent(uintptr(handle), id))
}

// IsFence reports whether handle is one of the Go core's fence events (streams.Driver.IsFence),
// which the C core refuses to wrap by handle.
//
//streambridge:keepgil
func IsFence(handle uint64) (bool, error) {
	b, err := driver()
	if err != nil {
		return false, err
	}
	return b.Driver().IsFence(uintptr(handle)), nil
}

// StreamHandle is the CUstream of key.
//
//streambridge:keepgil
func StreamHandle(key int64) (uint64, error) {
	return call1(key, func(s *streams.Stream) (uint64, error) { return uint64(s.Handle()), nil })
}

// StreamID is key's cuStreamGetId (streams.Stream.ID): unique among the process's streams
// for its lifetime; refused (CaptureError) while the driver would have to be asked of a
// capturing stream.
//
// Not kept with the GIL: it takes the capture lock, which a call waiting for a host callback
// may hold (an enqueue of the C core's during a capture, MAY_WAIT in python/native/holds.inc).
func StreamID(key int64) (uint64, error) { return call1(key, (*streams.Stream).ID) }

// DeviceCount is the number of devices the driver offers (cuDeviceGetCount).
func DeviceCount() (int, error) {
	b, err := driver()
	if err != nil {
		return 0, err
	}
	return b.Driver().DeviceCount()
}

// DeviceDescription is a device's name, compute capability and PCI bus id, as
// `python -m streambridge` prints them.
func DeviceDescription(ordinal int) (string, error) {
	b, err := driver()
	if err != nil {
		return "", err
	}
	d, err := b.Driver().Device(ordinal)
	if err != nil {
		return "", err
	}
	name, err := d.Name()
	if err != nil {
		return "", err
	}
	major, minor, err := d.ComputeCapability()
	if err != nil {
		return "", err
	}
	bus, err := d.PCIBusID()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s, compute capability %d.%d, PCI %s", name, major, minor, bus), nil
}

// DriverVersion is cuDriverGetVersion: 1000*major + 10*minor.
func DriverVersion() (int, error) {
	b, err := driver()
	if err != nil {
		return 0, err
	}
	return b.Driver().Version()
}

// StreamPriority is cuStreamGetPriority of key.
//
// Not kept with the GIL: it takes the capture lock, which a call waiting for a host callback
// may hold (an enqueue of the C core's during a capture, MAY_WAIT in python/native/holds.inc).
func StreamPriority(key int64) (int, error) { return call1(key, (*streams.Stream).Priority) }

// StreamNonBlocking reports whether key was created non-blocking; refused while it is
// capturing (the driver would invalidate the capture).
//
// Not kept with the GIL: it takes the capture lock, which a call waiting for a host callback
// may hold (an enqueue of the C core's during a capture, MAY_WAIT in python/native/holds.inc).
func StreamNonBlocking(key int64) (bool, error) { return call1(key, (*streams.Stream).NonBlocking) }

// DeviceContext is the CUcontext of device's primary context, retained by the bridge for
// the process: the C core makes its events there (cuEventCreate with it current).
func DeviceContext(device int) (uint64, error) {
	c, err := context(device)
	if err != nil {
		return 0, err
	}
	return uint64(c.Handle()), nil
}

// OpenIPCEvent opens an event another process exported (cuIpcOpenEventHandle) on device
// and returns the CUevent, which the C core owns from then on (it destroys it as any of its
// events). The driver refuses a handle from this same process.
func OpenIPCEvent(device int, handle string) (uint64, error) {
	var h streams.IPCEventHandle
	raw, err := hex.DecodeString(handle)
	if err != nil || len(raw) != len(h) {
		return 0, fmt.Errorf("%w: an event IPC handle is %d bytes", bridge.ErrValue, len(h))
	}
	copy(h[:], raw)
	c, err := context(device)
	if err != nil {
		return 0, err
	}
	ev, err := c.OpenIPCEvent(h)
	if err != nil {
		return 0, err
	}
	e, err := ev.Disown()
	return uint64(e), err
}

// Close forgets key, which must name an object of kind (a boundary.ObjectKind), destroying
// what streambridge created; false if key was not open. A key of another kind is a type
// error, and nothing is closed. It lets the GIL go, as gopy's calls do: a destroy waits
// while another thread's call that synchronizes the context waits for a host callback, and
// a module's unload synchronizes the context itself (bench/callback_waits.c), and a Python
// callback may want the GIL.
func Close(key int64, kind int) (bool, error) {
	mu.Lock()
	k, ok := table[key]
	if ok && k.kind != boundary.ObjectKind(kind) {
		mu.Unlock()
		return false, fmt.Errorf("%w: key %d is a %s, not a %s", bridge.ErrType, key, k.kind.Name(), boundary.ObjectKind(kind).Name())
	}
	delete(table, key)
	mu.Unlock()
	if !ok {
		return false, nil
	}
	for _, t := range k.threads {
		t.Close() // wrappers of the per-thread stream: nothing to destroy
	}
	if c, ok := k.obj.(interface{ Close() error }); ok {
		return done(c.Close())
	}
	return true, nil // a kernel: its module owns it
}

// LiveStreams counts the keys (streams, events, graphs, modules, kernels) not yet closed.
//
//streambridge:keepgil
func LiveStreams() int {
	mu.RLock()
	defer mu.RUnlock()
	return len(table)
}

// Entry is the address of the C function for a cuda.h entry point the C core calls without
// crossing into Go (boundary.EntryNames; see driver.API.Entry); 0 for one not offered.
func Entry(name string) (uint64, error) {
	api, err := driverAPI()
	if err != nil {
		return 0, err
	}
	return uint64(api.Entry(name)), nil
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
	s, err := find[*streams.Stream](key)
	if err != nil {
		return 0, err
	}
	g, err := s.EndCapture()
	if err != nil {
		return 0, err
	}
	defer g.Close() // the executable keeps what it needs
	e, err := g.Instantiate()
	if err != nil {
		return 0, err
	}
	return store(boundary.ObjectGraph, e), nil
}

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
		return 0, err
	}
	return store(boundary.ObjectModule, m), nil
}

func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// ModuleContext is the CUcontext module key m was loaded in: what the C core makes current
// for a launch of its kernels.
//
//streambridge:keepgil
func ModuleContext(m int64) (uint64, error) {
	return call1(m, func(mod *streams.Module) (uint64, error) { return uint64(mod.Context().Handle()), nil })
}

// KeepModule makes graph, a CUgraph a capture is adding to, keep module key m loaded
// (streams.Module.KeepFor). The C core calls it where its launch of one of m's kernels is
// captured, under the capture lock, with the GIL or without it (MAY_WAIT): it touches
// nothing of Python (no error is raised from it) and answers a CUresult, 0 or the driver's
// error, or CUDA_ERROR_INVALID_HANDLE where m is not an open module's key (the core keeps
// m's key open across its launch). Its user object's calls did not wait beside a context
// synchronization (bench/callback_waits.c, part three).
//
//streambridge:keepgil
func KeepModule(m int64, graph uint64) int {
	mod, err := find[*streams.Module](m)
	if err == nil {
		err = mod.KeepFor(uintptr(graph))
	}
	var call *streams.CallError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &call):
		return int(call.Result)
	}
	return int(driverapi.ErrorInvalidHandle)
}

// ModuleFunction looks a kernel up in module key m by name or name expression and
// returns its key.
func ModuleFunction(m int64, name string) (int64, error) {
	return call1(m, func(mod *streams.Module) (int64, error) {
		f, err := mod.Function(name)
		if err != nil {
			return 0, err
		}
		return store(boundary.ObjectKernel, f), nil
	})
}

// FunctionHandle is the CUfunction of kernel key f.
//
//streambridge:keepgil
func FunctionHandle(f int64) (uint64, error) {
	return call1(f, func(fn *streams.Function) (uint64, error) { return uint64(fn.Handle()), nil })
}

// StreamFence is the CUevent stream key s records for others to wait on (see
// streams.Stream.WaitStream), made in the stream's context on first use and kept by it. It
// lets the GIL go: the first use may create the event, which waits while another thread's
// call that synchronizes the context waits for a host callback (bench/callback_waits.c).
func StreamFence(key int64) (uint64, error) {
	return call1(key, func(s *streams.Stream) (uint64, error) {
		e, err := s.Fence()
		if err != nil {
			return 0, err
		}
		return uint64(e.Handle()), nil
	})
}

// ResultName is the CUDA_ERROR_* name of a CUresult.
//
//streambridge:keepgil
func ResultName(code int) string { return streams.Result(code).Name() }

// ReadWords reads n little-endian words of this process's memory at addr, as hex, without
// letting a bad address fault: the Python package reads DLPack capsules this way, whose
// pointers a broken producer can make point anywhere. An unreadable address is a value
// error.
//
//streambridge:keepgil
func ReadWords(addr uint64, n int) (string, error) {
	words, ok := cuda.ReadWords(uintptr(addr), n)
	if !ok {
		return "", fmt.Errorf("%w: %d words at %#x are not readable memory", bridge.ErrValue, n, addr)
	}
	buf := make([]byte, 8*len(words))
	for i, w := range words {
		binary.LittleEndian.PutUint64(buf[8*i:], w)
	}
	return hex.EncodeToString(buf), nil
}

// StreamMemory is where the driver's stream objects are and how they name themselves, as
// the len(boundary.StreamMemoryFields) words of driver.StreamMemory in decimal, separated by
// spaces: the C core proves new handles and verifies borrowed streams' identities with
// them. Empty where none is known (no check has run yet, or no layout was found).
//
//streambridge:keepgil
func StreamMemory() string {
	api, err := driverAPI()
	if err != nil {
		return ""
	}
	m := api.StreamMemory()
	return words(boundary.StreamMemoryWords(m), m.OK)
}

// driverAPI is the driver's plumbing (internal/plumbing): the raw entry points and memory
// descriptions, for the C core.
func driverAPI() (driverapi.API, error) {
	b, err := driver()
	if err != nil {
		return nil, err
	}
	if api := plumbing.API(b.Driver()); api != nil {
		return api, nil
	}
	return nil, streams.ErrNil
}

// CaptureGate is the address of the capture lock's face to the C core
// (streams.Driver.CaptureGate): the C core's calls on streams and events are ordered with
// Go's through it (python/native/capturelock.inc).
func CaptureGate() (uint64, error) {
	b, err := driver()
	if err != nil {
		return 0, err
	}
	return uint64(b.Driver().CaptureGate()), nil
}

// words spells words in decimal, separated by spaces, where ok; empty where not.
func words(ws []uint64, ok bool) string {
	if !ok {
		return ""
	}
	s := make([]string, len(ws))
	for i, w := range ws {
		s[i] = strconv.FormatUint(w, 10)
	}
	return strings.Join(s, " ")
}

// EventMemory is where the driver's event objects are and how they name themselves (see
// driver.EventMemory), spelled as StreamMemory spells streams'. Empty where none is known.
//
//streambridge:keepgil
func EventMemory() string {
	api, err := driverAPI()
	if err != nil {
		return ""
	}
	m := api.EventMemory()
	return words(boundary.EventMemoryWords(m), m.OK)
}

// FaultHandler tells the Go core of the C core's SIGSEGV handler, installed in front of
// previous, to which it hands every fault it does not take (cuda.ChainsToGo); it reports
// whether previous is Go's. The C core calls it once, as it installs the handler.
//
//streambridge:keepgil
func FaultHandler(handler, previous uint64) bool {
	return cuda.ChainsToGo(uintptr(handler), uintptr(previous))
}

// LetGoAroundWaits hands the Go checks the C core's pair of functions that let the GIL go
// (or, with none, detach the thread, which lets the core lock go) and take it back around
// the driver calls a check makes now and then that may wait behind a host callback
// (cuda.LetGoAroundWaits). The C core calls it once, as it is given the entry points.
//
//streambridge:keepgil
func LetGoAroundWaits(letGo, takeBack uint64) bool {
	cuda.LetGoAroundWaits(uintptr(letGo), uintptr(takeBack))
	return true
}

// ValidationReads says how handle checks read memory now: "loads" (Go's SIGSEGV handler
// is installed, or the C core's in front of it; fast) or "process_vm_readv" (another
// handler is, such as faulthandler's).
//
//streambridge:keepgil
func ValidationReads() string { return cuda.ValidationReads() }
