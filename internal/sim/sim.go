// Package sim is the software driver: the CUDA driver API's stream, event, host-function,
// capture and graph semantics implemented in Go, for machines without a GPU. It runs no
// device code: loading a module or launching a kernel returns CUDA_ERROR_NOT_SUPPORTED.
//
// Each stream is an in-order queue: every operation is a goroutine that waits for the one
// before it on the same stream and for its cross-stream dependencies, so streams run
// concurrently and ordering is exactly what events and waits make it. The legacy default
// stream synchronizes with every blocking stream of its context, as in CUDA. The current
// context is kept per OS thread, as the real driver keeps it.
package sim

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"

	"github.com/streambridge/streambridge/internal/driver"
)

// Version is what DriverGetVersion reports where STREAMBRIDGE_SIM_VERSION does not say
// otherwise: the driver API level whose semantics this package follows.
const Version = 13000

// VersionSetting names the environment variable that makes the software driver report an
// older CUDA version (as 1000*major + 10*minor, from driver.MinVersion to Version) and
// answer CUDA_ERROR_NOT_SUPPORTED from the optional entry points newer than it
// (driver.EntryPoints), as such a driver lacks them.
const VersionSetting = "STREAMBRIDGE_SIM_VERSION"

// ReportedVersion is the version STREAMBRIDGE_SIM_VERSION names (Version when unset); an
// error, naming the setting, for anything else.
func ReportedVersion() (int, error) {
	v := os.Getenv(VersionSetting)
	if v == "" {
		return Version, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < driver.MinVersion || n > Version {
		return 0, fmt.Errorf("%s=%q: want a CUDA version as 1000*major + 10*minor, from %d (the oldest streambridge works with) to %d",
			VersionSetting, v, driver.MinVersion, Version)
	}
	return n, nil
}

// lacks reports whether the version reported is older than the entry point named.
func (d *Driver) lacks(name string) bool { return d.version < driver.EntryVersion(name) }

// Driver is one software driver instance, with its own devices and objects.
type Driver struct {
	mu       sync.Mutex
	objects  map[uintptr]any // every live handle, by its address
	freed    []uintptr       // addresses of destroyed objects, reused last-freed first
	nextAddr uintptr
	nextID   uint64
	devices  []*device
	current  map[int]*context           // by OS thread id
	modes    map[int]driver.CaptureMode // threads' capture interaction modes, where not global (capture.go)
	ongoing  map[*capture]struct{}      // captures begun and not yet ended (capture.go)
	streams  slab[streamMem]            // streams' memory (memory_objects.go)
	events   slab[eventMem]             // events' memory (memory_objects.go)
	// unlearnable: as a driver whose layout cannot be learned (driver.LayoutSetting): the
	// checks answer ErrorNotSupported, the memory descriptions are not OK.
	unlearnable bool
	layout      objLayout       // where its objects keep their words (memory_objects.go)
	version     int             // what DriverGetVersion reports (ReportedVersion)
	destructors destructorQueue // user objects' destructors, run one at a time (userobject.go)
	// room is signalled (on mu) when a record of a timing event has run: a record waiting
	// for its stream's queue of them to have room (TimedRecordsPerStream) looks again.
	room sync.Cond
	// copies runs copies one at a time. Two copies of one byte at once, on two streams, are
	// a race in Go's memory model (the race detector ends the test) where a GPU only leaves
	// the byte undefined; a program's own reads of its host memory are ordered by its
	// synchronizes, as on a GPU.
	copies sync.Mutex
}

type device struct {
	ordinal int
	ctx     *context
	retains int
	used    uint64 // bytes of its DeviceMemory allocated
}

// DeviceMemory is each software device's memory: a MemAlloc past it fails with
// CUDA_ERROR_OUT_OF_MEMORY, as the real driver's does past its device's, rather than ask
// the host for it (the allocations are host memory).
const DeviceMemory = 4 << 30

type context struct {
	handle driver.Context
	dev    *device
	// primary is, for a green context, the primary context it was made from, whose
	// objects it shares; own marks a context made with CtxCreate, which shares none
	primary *context
	own     bool
	legacy  *stream
	ptds    map[int]*stream // each OS thread's per-thread default stream, made on its first use
	// blocking streams synchronize with the legacy stream
	blocking map[*stream]struct{}
	// hostFuncs serializes host functions, as the real driver runs them on one thread:
	// a host function that blocks holds up every stream's host functions.
	hostFuncs sync.Mutex
	orphans   []chan struct{} // destroyed streams' last operations, maybe still to run (pending)
	lastEvent *eventMem       // the last event made in it that is alive, in the event slab
}

type stream struct {
	handle   driver.Stream
	ctx      *context
	flags    uint32
	priority int
	id       uint64
	legacy   bool
	tail     chan struct{} // completion of the last operation enqueued
	capture  *capture
	frontier []*node // during capture: the nodes the next captured operation depends on
	waits    int     // synchronizes of the stream in the driver (see GraphLaunch)
	timed    int     // records of timing events enqueued and not yet run (TimedRecordsPerStream)
}

type record struct {
	done chan struct{}
	at   time.Time // written before done is closed
}

type eventState struct {
	flags    uint32
	rec      *record
	captured *capturedRecord // last recorded in a capturing stream
	waits    int             // synchronizes of the event in the driver (see EventRecord)
}

type event struct {
	handle driver.Event
	ctx    *context
	state  *eventState // shared by events opened from its IPC handle
	opened bool
	id     uint64 // its identity: never reused (EventCheck)
}

type capturedRecord struct {
	capture  *capture
	frontier []*node
}

type capture struct {
	id      uint64
	mode    driver.CaptureMode
	thread  int // the OS thread that began it: the only one that may end it, but in relaxed mode
	origin  *stream
	graph   *graph // what is captured, as cuStreamGetCaptureInfo names it; ended, the result
	invalid bool
	ended   bool
	streams map[*stream]struct{}
}

type node struct {
	run  func()
	deps []*node
	mem  *allocation // the device memory a copy node names (GraphInstantiateWithFlags)
}

type graph struct {
	handle driver.Graph
	nodes  []*node
	owns   owned // user objects it holds references to (userobject.go)
	// capturing: a capture is adding to it, and the capture's end gives or destroys it
	capturing bool
}

type graphExec struct {
	handle   driver.GraphExec
	nodes    []*node
	owns     owned // references taken from its graph's at instantiation
	inFlight int   // launches not yet run: its references outlive it until they have
	closed   bool
}

type allocation struct {
	ctx  *context
	buf  []byte
	base uintptr // its address
}

var _ driver.API = (*Driver)(nil)

// MaxDevices is the most devices STREAMBRIDGE_SIM_DEVICES may ask for.
const MaxDevices = 64

// DeviceCount is the number of devices STREAMBRIDGE_SIM_DEVICES names: 2 when unset; an
// error, naming the variable, for anything but a count from 0 to MaxDevices.
func DeviceCount() (int, error) {
	v := os.Getenv("STREAMBRIDGE_SIM_DEVICES")
	if v == "" {
		return 2, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > MaxDevices {
		return 0, fmt.Errorf("STREAMBRIDGE_SIM_DEVICES=%q: want a device count from 0 to %d", v, MaxDevices)
	}
	return n, nil
}

// New returns a software driver with DeviceCount devices (2 where the setting is bad:
// streams.Default refuses it before).
func New() *Driver {
	n, err := DeviceCount()
	if err != nil {
		n = 2
	}
	d := &Driver{
		objects:  map[uintptr]any{},
		nextAddr: 0x5b0000001000,
		current:  map[int]*context{},
		modes:    map[int]driver.CaptureMode{},
		ongoing:  map[*capture]struct{}{},
	}
	d.room.L = &d.mu
	for i := range n {
		d.devices = append(d.devices, &device{ordinal: i})
	}
	d.unlearnable, _ = driver.Unlearnable() // streams.Default refuses a bad value before
	n, _ = Layout()                         // and a bad layout
	d.layout = layouts[n]
	d.unlearnable = d.unlearnable || d.layout.split
	if d.version, err = ReportedVersion(); err != nil { // and a bad version
		d.version = Version
	}
	return d
}

func (d *Driver) Name() string { return "sim" }

// newHandle gives obj an address that no other live object of this driver has: the most
// recently freed one, as the real driver's allocator hands a destroyed stream's address to
// the next stream (so a handle kept past its object's destroy can name a new object), else
// a new one. Caller holds d.mu.
func (d *Driver) newHandle(obj any) uintptr {
	var h uintptr
	if n := len(d.freed); n > 0 {
		h, d.freed = d.freed[n-1], d.freed[:n-1]
	} else {
		h = d.nextAddr
		d.nextAddr += 0x40
	}
	d.objects[h] = obj
	return h
}

// forget destroys the object at h and frees its address for reuse (allocations, whose
// addresses are spans, are not reused). Caller holds d.mu.
func (d *Driver) forget(h uintptr) {
	if d.unplace(h) {
		delete(d.objects, h)
		return
	}
	if a, span := d.objects[h].(*allocation); span {
		a.ctx.dev.used -= uint64(len(a.buf))
	} else {
		d.freed = append(d.freed, h)
	}
	delete(d.objects, h)
}

func lookup[T any](d *Driver, h uintptr) (T, bool) {
	obj, ok := d.objects[h].(T)
	return obj, ok
}

// live is the object of kind T at h, for a call that uses it. The real driver reads the
// object a handle points to: one that names none (destroyed, never made, or another kind
// of object) kills the process (SIGSEGV, on an H100). So the software driver kills it too
// (gone), where a bare CUDA_ERROR_INVALID_HANDLE would let a CPU test pass that crashes on
// a GPU. Only the handle checks (StreamCheck, EventCheck) may be given any handle. Caller
// holds d.mu.
func live[T any](d *Driver, h uintptr) T {
	obj, ok := d.objects[h].(T)
	if !ok {
		gone(h)
	}
	return obj
}

// gone ends the process, as the real driver would, naming the entry point that was given
// handle h, which names no live object of the kind it takes, and the stack that called it.
func gone(h uintptr) {
	crash(fmt.Sprintf("was given %#x, which is no live object of the kind it takes (destroyed, never made, or another kind)", h))
}

// crash ends the process where the real driver would crash, naming the entry point that
// called it, what it met, and the stack.
func crash(met string) {
	call := "a driver call"
	pcs := make([]uintptr, 16)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		if name, ok := strings.CutPrefix(f.Function, "github.com/streambridge/streambridge/internal/sim.(*Driver)."); ok &&
			name != "" && unicode.IsUpper(rune(name[0])) {
			call = "cu" + name
			break
		}
		if !more {
			break
		}
	}
	fmt.Fprintf(os.Stderr, "streambridge software driver: %s %s: the real driver would crash here. The process ends.\n%s",
		call, met, debug.Stack())
	os.Exit(GoneExitCode)
}

// GoneExitCode is the exit status of a process the software driver ended (see live).
const GoneExitCode = 86

func (d *Driver) DriverGetVersion() (int, driver.Result) { return d.version, driver.Success }

func (d *Driver) DeviceGetCount() (int, driver.Result) { return len(d.devices), driver.Success }

func (d *Driver) device(dev driver.Device) (*device, driver.Result) {
	if dev < 0 || int(dev) >= len(d.devices) {
		return nil, driver.ErrorInvalidDevice
	}
	return d.devices[dev], driver.Success
}

func (d *Driver) DeviceGet(ordinal int) (driver.Device, driver.Result) {
	if ordinal < 0 || ordinal >= len(d.devices) {
		return 0, driver.ErrorInvalidDevice
	}
	return driver.Device(ordinal), driver.Success
}

func (d *Driver) DeviceGetName(dev driver.Device) (string, driver.Result) {
	if _, r := d.device(dev); r != driver.Success {
		return "", r
	}
	return fmt.Sprintf("streambridge software device %d", dev), driver.Success
}

// DeviceGetAttribute knows the compute capability only, which is 0.0: the software
// driver has no instruction set.
func (d *Driver) DeviceGetAttribute(attr int32, dev driver.Device) (int, driver.Result) {
	if _, r := d.device(dev); r != driver.Success {
		return 0, r
	}
	switch attr {
	case driver.AttrComputeCapabilityMajor, driver.AttrComputeCapabilityMinor:
		return 0, driver.Success
	}
	return 0, driver.ErrorInvalidValue
}

func (d *Driver) DeviceGetPCIBusId(dev driver.Device) (string, driver.Result) {
	if _, r := d.device(dev); r != driver.Success {
		return "", r
	}
	return fmt.Sprintf("0000:00:%02x.0", int(dev)), driver.Success
}

func (d *Driver) DeviceGetUuid(dev driver.Device) ([16]byte, driver.Result) {
	var u [16]byte
	if _, r := d.device(dev); r != driver.Success {
		return u, r
	}
	copy(u[:], "sb-sim-device")
	binary.BigEndian.PutUint16(u[14:], uint16(dev))
	return u, driver.Success
}

func (d *Driver) DevicePrimaryCtxRetain(dev driver.Device) (driver.Context, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, r := d.device(dev)
	if r != driver.Success {
		return 0, r
	}
	if v.ctx == nil {
		c := &context{dev: v, blocking: map[*stream]struct{}{}}
		c.handle = driver.Context(d.newHandle(c))
		c.legacy = &stream{ctx: c, legacy: true, id: d.streamID()}
		c.ptds = map[int]*stream{}
		v.ctx = c
	}
	v.retains++
	return v.ctx.handle, driver.Success
}

func (d *Driver) DevicePrimaryCtxRelease(dev driver.Device) driver.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, r := d.device(dev)
	if r != driver.Success {
		return r
	}
	if v.retains == 0 {
		return driver.ErrorInvalidContext
	}
	v.retains--
	if v.retains == 0 {
		d.resetContext(v.ctx)
	}
	return driver.Success
}

func (d *Driver) DevicePrimaryCtxActive(dev driver.Device) (bool, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, r := d.device(dev)
	if r != driver.Success {
		return false, r
	}
	return v.retains > 0, driver.Success
}

// resetContext is what releasing a primary context's last retain does in CUDA: every
// stream, event, graph and allocation made in it is destroyed, and its handle is reused
// by the next retain. Caller holds d.mu.
func (d *Driver) resetContext(c *context) {
	for h, o := range d.objects {
		var in *context
		switch o := o.(type) {
		case *stream:
			in = o.ctx
		case *event:
			in = o.ctx
		case *allocation:
			in = o.ctx
		}
		if in == c {
			d.forget(h)
		}
	}
	for cap := range d.ongoing {
		if cap.origin.ctx == c { // its stream is gone with the context
			delete(d.ongoing, cap)
		}
	}
	c.legacy = &stream{ctx: c, legacy: true, id: d.streamID()}
	c.ptds = map[int]*stream{}
	c.orphans = nil
	c.blocking = map[*stream]struct{}{}
}

func (d *Driver) streamID() uint64 {
	d.nextID++
	return d.nextID
}

func (d *Driver) currentCtx() *context { return d.current[syscall.Gettid()] }

// perThread is the calling OS thread's per-thread default stream of c (CU_STREAM_PER_THREAD),
// made on the thread's first use: a goroutine that moves between threads meets another one,
// as on the real driver. Caller holds d.mu.
func (d *Driver) perThread(c *context) *stream {
	tid := syscall.Gettid()
	s := c.ptds[tid]
	if s == nil {
		s = &stream{ctx: c, id: d.streamID()}
		c.ptds[tid] = s
		c.blocking[s] = struct{}{}
	}
	return s
}

func (d *Driver) CtxGetCurrent() (driver.Context, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.currentCtx(); c != nil {
		return c.handle, driver.Success
	}
	return 0, driver.Success
}

func (d *Driver) CtxSetCurrent(h driver.Context) driver.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	tid := syscall.Gettid()
	if h == 0 {
		delete(d.current, tid)
		return driver.Success
	}
	c, ok := lookup[*context](d, uintptr(h))
	if !ok {
		return driver.ErrorInvalidContext
	}
	d.current[tid] = c
	return driver.Success
}

func (d *Driver) CtxGetDevice() (driver.Device, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.currentCtx()
	if c == nil {
		return 0, driver.ErrorInvalidContext
	}
	return driver.Device(c.dev.ordinal), driver.Success
}

// The priority range of an H200: 0 is the least priority, -5 the greatest.
const leastPriority, greatestPriority = 0, -5

func (d *Driver) CtxGetStreamPriorityRange() (int, int, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.currentCtx() == nil {
		return 0, 0, driver.ErrorInvalidContext
	}
	return leastPriority, greatestPriority, driver.Success
}
