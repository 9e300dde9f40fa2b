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
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/streambridge/streambridge/internal/driver"
)

// Version is what DriverGetVersion reports: the driver API level whose semantics this
// package follows.
const Version = 13000

// Driver is one software driver instance, with its own devices and objects.
type Driver struct {
	mu       sync.Mutex
	objects  map[uintptr]any // every live handle, by its address
	nextAddr uintptr
	nextID   uint64
	devices  []*device
	current  map[int]*context // by OS thread id
}

type device struct {
	ordinal int
	ctx     *context
	retains int
}

type context struct {
	handle driver.Context
	dev    *device
	legacy *stream
	ptds   *stream
	// blocking streams synchronize with the legacy stream
	blocking map[*stream]struct{}
	// hostFuncs serializes host functions, as the real driver runs them on one thread:
	// a host function that blocks holds up every stream's host functions.
	hostFuncs sync.Mutex
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
}

type record struct {
	done chan struct{}
	at   time.Time // written before done is closed
}

type eventState struct {
	flags    uint32
	rec      *record
	captured *capturedRecord // last recorded in a capturing stream
}

type event struct {
	handle driver.Event
	ctx    *context
	state  *eventState // shared by events opened from its IPC handle
	opened bool
}

type capturedRecord struct {
	capture  *capture
	frontier []*node
}

type capture struct {
	id      uint64
	mode    driver.CaptureMode
	origin  *stream
	nodes   []*node
	invalid bool
	ended   bool
	streams map[*stream]struct{}
}

type node struct {
	run  func()
	deps []*node
}

type graph struct {
	handle driver.Graph
	nodes  []*node
}

type graphExec struct {
	handle driver.GraphExec
	nodes  []*node
}

type allocation struct {
	ctx *context
	buf []byte
}

var _ driver.API = (*Driver)(nil)

// MaxDevices is the most devices STREAMBRIDGE_SIM_DEVICES may ask for.
const MaxDevices = 64

// New returns a software driver with the number of devices STREAMBRIDGE_SIM_DEVICES names
// (2 when unset or not a count from 0 to MaxDevices; streams.Default refuses such values).
func New() *Driver {
	n := 2
	if v, err := strconv.Atoi(os.Getenv("STREAMBRIDGE_SIM_DEVICES")); err == nil && v >= 0 && v <= MaxDevices {
		n = v
	}
	d := &Driver{
		objects:  map[uintptr]any{},
		nextAddr: 0x5b0000001000,
		current:  map[int]*context{},
	}
	for i := range n {
		d.devices = append(d.devices, &device{ordinal: i})
	}
	return d
}

func (d *Driver) Name() string { return "sim" }

// newHandle gives obj an address that no other live object of this driver has. Caller
// holds d.mu.
func (d *Driver) newHandle(obj any) uintptr {
	h := d.nextAddr
	d.nextAddr += 0x40
	d.objects[h] = obj
	return h
}

func lookup[T any](d *Driver, h uintptr) (T, bool) {
	obj, ok := d.objects[h].(T)
	return obj, ok
}

func (d *Driver) DriverGetVersion() (int, driver.Result) { return Version, driver.Success }

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
		c.ptds = &stream{ctx: c, id: d.streamID()}
		c.blocking[c.ptds] = struct{}{}
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
			delete(d.objects, h)
		}
	}
	c.legacy = &stream{ctx: c, legacy: true, id: d.streamID()}
	c.ptds = &stream{ctx: c, id: d.streamID()}
	c.blocking = map[*stream]struct{}{c.ptds: {}}
}

func (d *Driver) streamID() uint64 {
	d.nextID++
	return d.nextID
}

func (d *Driver) currentCtx() *context { return d.current[syscall.Gettid()] }

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

func (d *Driver) StreamCreateWithPriority(ch driver.Context, flags uint32, priority int) (driver.Stream, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.ctxIn(ch)
	if c == nil {
		return 0, driver.ErrorInvalidContext
	}
	if flags&^driver.StreamNonBlocking != 0 {
		return 0, driver.ErrorInvalidValue
	}
	priority = min(max(priority, greatestPriority), leastPriority) // the driver clamps
	s := &stream{ctx: c, flags: flags, priority: priority, id: d.streamID()}
	s.handle = driver.Stream(d.newHandle(s))
	if flags&driver.StreamNonBlocking == 0 {
		c.blocking[s] = struct{}{}
	}
	return s.handle, driver.Success
}

// ctxIn is the context a call names, or else the thread's current one. Caller holds d.mu.
func (d *Driver) ctxIn(h driver.Context) *context {
	if h == 0 {
		return d.currentCtx()
	}
	c, _ := lookup[*context](d, uintptr(h))
	return c
}

// stream resolves a handle, the special ones through the current context. Caller holds
// d.mu.
func (d *Driver) stream(h driver.Stream) (*stream, driver.Result) { return d.streamIn(0, h) }

// streamIn resolves a handle, the special ones through context ch (0: the current one).
// Caller holds d.mu.
func (d *Driver) streamIn(ch driver.Context, h driver.Stream) (*stream, driver.Result) {
	if h.IsSpecial() {
		c := d.ctxIn(ch)
		if c == nil {
			return nil, driver.ErrorInvalidContext
		}
		if h == driver.StreamPerThread {
			return c.ptds, driver.Success
		}
		return c.legacy, driver.Success
	}
	s, ok := lookup[*stream](d, uintptr(h))
	if !ok {
		return nil, driver.ErrorInvalidHandle
	}
	return s, driver.Success
}

// StreamCheck looks the handle up: the software driver knows every stream it made.
func (d *Driver) StreamCheck(h driver.Stream) (driver.Context, driver.Result) {
	if h.IsSpecial() {
		return 0, driver.Success
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := lookup[*stream](d, uintptr(h))
	if !ok {
		return 0, driver.ErrorInvalidHandle
	}
	return s.ctx.handle, driver.Success
}

func (d *Driver) StreamDestroy(h driver.Stream) driver.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	if h.IsSpecial() {
		return driver.ErrorInvalidHandle
	}
	s, r := d.stream(h)
	if r != driver.Success {
		return r
	}
	if s.capture != nil {
		s.capture.invalid = true
	}
	delete(d.objects, uintptr(h))
	delete(s.ctx.blocking, s)
	return driver.Success
}

// enqueue appends run to s and returns the channel closed when it has run. Caller holds
// d.mu.
func (d *Driver) enqueue(s *stream, run func(), deps ...chan struct{}) chan struct{} {
	if s.legacy {
		for b := range s.ctx.blocking {
			deps = append(deps, b.tail)
		}
	} else if s.flags&driver.StreamNonBlocking == 0 {
		deps = append(deps, s.ctx.legacy.tail)
	}
	prev := s.tail
	done := make(chan struct{})
	s.tail = done
	go func() {
		if prev != nil {
			<-prev
		}
		for _, dep := range deps {
			if dep != nil {
				<-dep
			}
		}
		if run != nil {
			run()
		}
		close(done)
	}()
	return done
}

// submit is what an operation does with its work: add it to s's capture while s is
// capturing, else enqueue it. It returns the channel closed when the work has run, or nil
// when it was captured. Caller holds d.mu.
func (d *Driver) submit(s *stream, run func()) chan struct{} {
	if s.capture != nil {
		captureNode(s, run)
		return nil
	}
	return d.enqueue(s, run)
}

// captureNode adds run to s's capture, after s's frontier. Caller holds d.mu.
func captureNode(s *stream, run func()) {
	n := &node{run: run, deps: s.frontier}
	s.capture.nodes = append(s.capture.nodes, n)
	s.frontier = []*node{n}
}

// uncapturable is what an operation that may not run during capture does to it: the
// capture is invalidated and the call fails.
func uncapturable(s *stream) driver.Result {
	s.capture.invalid = true
	return driver.ErrorCaptureUnsupported
}

func closed(ch chan struct{}) bool {
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (d *Driver) StreamQuery(ch driver.Context, h driver.Stream) driver.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, r := d.streamIn(ch, h)
	if r != driver.Success {
		return r
	}
	if s.capture != nil {
		return uncapturable(s)
	}
	if closed(s.tail) {
		return driver.Success
	}
	return driver.ErrorNotReady
}

func (d *Driver) StreamSynchronize(ch driver.Context, h driver.Stream) driver.Result {
	d.mu.Lock()
	s, r := d.streamIn(ch, h)
	if r != driver.Success {
		d.mu.Unlock()
		return r
	}
	if s.capture != nil {
		r := uncapturable(s)
		d.mu.Unlock()
		return r
	}
	tail := s.tail
	d.mu.Unlock()
	if tail != nil {
		<-tail
	}
	return driver.Success
}

func (d *Driver) StreamWaitEvent(ch driver.Context, h driver.Stream, eh driver.Event, flags uint32) driver.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, r := d.streamIn(ch, h)
	if r != driver.Success {
		return r
	}
	e, ok := lookup[*event](d, uintptr(eh))
	if !ok {
		return driver.ErrorInvalidHandle
	}
	if flags != 0 {
		return driver.ErrorInvalidValue
	}
	if cr := e.state.captured; cr != nil {
		return d.joinCapture(s, cr)
	}
	if s.capture != nil {
		// A captured stream may not depend on work outside its capture.
		s.capture.invalid = true
		return driver.ErrorCaptureIsolation
	}
	if e.state.rec != nil {
		d.enqueue(s, nil, e.state.rec.done)
	}
	return driver.Success
}

// joinCapture makes s wait on a point of a capture: s joins that capture (a fork) or, if
// already in it, gains the dependency (a join).
func (d *Driver) joinCapture(s *stream, cr *capturedRecord) driver.Result {
	switch {
	case s.capture == nil:
		if s.legacy {
			return driver.ErrorCaptureImplicit
		}
		s.capture = cr.capture
		s.frontier = append([]*node(nil), cr.frontier...)
		cr.capture.streams[s] = struct{}{}
	case s.capture == cr.capture:
		s.frontier = append(s.frontier, cr.frontier...)
	default:
		return driver.ErrorCaptureMerge
	}
	return driver.Success
}

func (d *Driver) StreamGetPriority(h driver.Stream) (int, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, r := d.stream(h)
	if r != driver.Success {
		return 0, r
	}
	return s.priority, driver.Success
}

func (d *Driver) StreamGetFlags(h driver.Stream) (uint32, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, r := d.stream(h)
	if r != driver.Success {
		return 0, r
	}
	return s.flags, driver.Success
}

func (d *Driver) StreamGetCtx(h driver.Stream) (driver.Context, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, r := d.stream(h)
	if r != driver.Success {
		return 0, r
	}
	return s.ctx.handle, driver.Success
}

func (d *Driver) StreamGetId(h driver.Stream) (uint64, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, r := d.stream(h)
	if r != driver.Success {
		return 0, r
	}
	return s.id, driver.Success
}

func (d *Driver) LaunchHostFunc(ch driver.Context, h driver.Stream, key uintptr) driver.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, r := d.streamIn(ch, h)
	if r != driver.Success {
		return r
	}
	c := s.ctx
	run := func() {
		c.hostFuncs.Lock()
		defer c.hostFuncs.Unlock()
		driver.RunHostFunc(key)
	}
	d.submit(s, run)
	return driver.Success
}

func (d *Driver) StreamBeginCapture(h driver.Stream, mode driver.CaptureMode) driver.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, r := d.stream(h)
	if r != driver.Success {
		return r
	}
	if mode > driver.CaptureModeRelaxed {
		return driver.ErrorInvalidValue
	}
	if s.legacy {
		return driver.ErrorCaptureUnsupported
	}
	if s.capture != nil {
		return driver.ErrorIllegalState
	}
	d.nextID++
	s.capture = &capture{id: d.nextID, mode: mode, origin: s, streams: map[*stream]struct{}{s: {}}}
	s.frontier = nil
	return driver.Success
}

func (d *Driver) StreamEndCapture(h driver.Stream) (driver.Graph, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, r := d.stream(h)
	if r != driver.Success {
		return 0, r
	}
	c := s.capture
	if c == nil {
		return 0, driver.ErrorIllegalState
	}
	if c.origin != s {
		return 0, driver.ErrorCaptureUnmatched
	}
	joined := ancestors(s.frontier)
	unjoined := false
	for t := range c.streams {
		for _, n := range t.frontier {
			if _, ok := joined[n]; !ok {
				unjoined = true
			}
		}
		t.capture, t.frontier = nil, nil
	}
	c.ended = true
	switch {
	case c.invalid:
		return 0, driver.ErrorCaptureInvalidated
	case unjoined:
		return 0, driver.ErrorCaptureUnjoined
	}
	g := &graph{nodes: c.nodes}
	g.handle = driver.Graph(d.newHandle(g))
	return g.handle, driver.Success
}

func ancestors(frontier []*node) map[*node]struct{} {
	seen := map[*node]struct{}{}
	var visit func(n *node)
	visit = func(n *node) {
		if _, ok := seen[n]; ok {
			return
		}
		seen[n] = struct{}{}
		for _, p := range n.deps {
			visit(p)
		}
	}
	for _, n := range frontier {
		visit(n)
	}
	return seen
}

func (d *Driver) StreamIsCapturing(h driver.Stream) (driver.CaptureStatus, driver.Result) {
	st, _, r := d.StreamGetCaptureInfo(0, h)
	return st, r
}

func (d *Driver) StreamGetCaptureInfo(ch driver.Context, h driver.Stream) (driver.CaptureStatus, uint64, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, r := d.streamIn(ch, h)
	if r != driver.Success {
		return 0, 0, r
	}
	switch {
	case s.capture == nil:
		return driver.CaptureStatusNone, 0, driver.Success
	case s.capture.invalid:
		return driver.CaptureStatusInvalidated, s.capture.id, driver.Success
	}
	return driver.CaptureStatusActive, s.capture.id, driver.Success
}

func (d *Driver) GraphGetNodes(h driver.Graph) (int, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	g, ok := lookup[*graph](d, uintptr(h))
	if !ok {
		return 0, driver.ErrorInvalidHandle
	}
	return len(g.nodes), driver.Success
}

func (d *Driver) GraphInstantiateWithFlags(h driver.Graph, flags uint64) (driver.GraphExec, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	g, ok := lookup[*graph](d, uintptr(h))
	if !ok {
		return 0, driver.ErrorInvalidHandle
	}
	e := &graphExec{nodes: append([]*node(nil), g.nodes...)}
	e.handle = driver.GraphExec(d.newHandle(e))
	return e.handle, driver.Success
}

// GraphLaunch runs the nodes in the order they were captured, which respects every
// dependency: a node is captured after the nodes it depends on.
func (d *Driver) GraphLaunch(h driver.GraphExec, sh driver.Stream) driver.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := lookup[*graphExec](d, uintptr(h))
	if !ok {
		return driver.ErrorInvalidHandle
	}
	s, r := d.stream(sh)
	if r != driver.Success {
		return r
	}
	nodes := e.nodes
	run := func() {
		for _, n := range nodes {
			n.run()
		}
	}
	d.submit(s, run)
	return driver.Success
}

func (d *Driver) GraphUpload(h driver.GraphExec, sh driver.Stream) driver.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := lookup[*graphExec](d, uintptr(h)); !ok {
		return driver.ErrorInvalidHandle
	}
	_, r := d.stream(sh)
	return r
}

func (d *Driver) GraphExecDestroy(h driver.GraphExec) driver.Result {
	return d.destroy(uintptr(h), func(o any) bool { _, ok := o.(*graphExec); return ok })
}

func (d *Driver) GraphDestroy(h driver.Graph) driver.Result {
	return d.destroy(uintptr(h), func(o any) bool { _, ok := o.(*graph); return ok })
}

func (d *Driver) destroy(h uintptr, is func(any) bool) driver.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	if o, ok := d.objects[h]; !ok || !is(o) {
		return driver.ErrorInvalidHandle
	}
	delete(d.objects, h)
	return driver.Success
}

func (d *Driver) EventCreate(ch driver.Context, flags uint32) (driver.Event, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.ctxIn(ch)
	if c == nil {
		return 0, driver.ErrorInvalidContext
	}
	all := driver.EventBlockingSync | driver.EventDisableTiming | driver.EventInterprocess
	if flags&^all != 0 ||
		(flags&driver.EventInterprocess != 0 && flags&driver.EventDisableTiming == 0) {
		return 0, driver.ErrorInvalidValue
	}
	e := &event{ctx: c, state: &eventState{flags: flags}}
	e.handle = driver.Event(d.newHandle(e))
	return e.handle, driver.Success
}

func (d *Driver) EventDestroy(h driver.Event) driver.Result {
	return d.destroy(uintptr(h), func(o any) bool { _, ok := o.(*event); return ok })
}

func (d *Driver) EventRecord(ch driver.Context, eh driver.Event, sh driver.Stream) driver.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := lookup[*event](d, uintptr(eh))
	if !ok {
		return driver.ErrorInvalidHandle
	}
	s, r := d.streamIn(ch, sh)
	if r != driver.Success {
		return r
	}
	if s.capture != nil {
		e.state.captured = &capturedRecord{capture: s.capture, frontier: append([]*node(nil), s.frontier...)}
		return driver.Success
	}
	rec := &record{}
	rec.done = d.enqueue(s, func() { rec.at = time.Now() })
	e.state.rec, e.state.captured = rec, nil
	return driver.Success
}

func (d *Driver) EventRecordAndWait(ch driver.Context, e driver.Event, from, to driver.Stream) (driver.Result, bool) {
	if r := d.EventRecord(ch, e, from); r != driver.Success {
		return r, false
	}
	return d.StreamWaitEvent(ch, to, e, 0), true
}

func (d *Driver) event(h driver.Event) (*eventState, driver.Result) {
	e, ok := lookup[*event](d, uintptr(h))
	if !ok {
		return nil, driver.ErrorInvalidHandle
	}
	if c := e.state.captured; c != nil {
		if c.capture.ended { // what the real driver answers once the capture is over (H200)
			return nil, driver.ErrorInvalidValue
		}
		return nil, driver.ErrorCapturedEvent
	}
	return e.state, driver.Success
}

func (d *Driver) EventQuery(h driver.Event) driver.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, r := d.event(h)
	if r != driver.Success {
		return r
	}
	if e.rec == nil || closed(e.rec.done) {
		return driver.Success
	}
	return driver.ErrorNotReady
}

func (d *Driver) EventSynchronize(h driver.Event) driver.Result {
	d.mu.Lock()
	e, r := d.event(h)
	if r != driver.Success {
		d.mu.Unlock()
		return r
	}
	rec := e.rec
	d.mu.Unlock()
	if rec != nil {
		<-rec.done
	}
	return driver.Success
}

func (d *Driver) EventElapsedTime(start, end driver.Event) (float32, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, r := d.event(start)
	if r != driver.Success {
		return 0, r
	}
	e, r := d.event(end)
	if r != driver.Success {
		return 0, r
	}
	if (s.flags|e.flags)&driver.EventDisableTiming != 0 || s.rec == nil || e.rec == nil {
		return 0, driver.ErrorInvalidHandle
	}
	if !closed(s.rec.done) || !closed(e.rec.done) {
		return 0, driver.ErrorNotReady
	}
	return float32(e.rec.at.Sub(s.rec.at).Seconds() * 1e3), driver.Success
}

// The software driver's IPC handle names the event and the process that made it; it can be
// opened in that process only.
const ipcMagic = "streambridge-sim-ipc"

func (d *Driver) IpcGetEventHandle(h driver.Event) (driver.IPCEventHandle, driver.Result) {
	var out driver.IPCEventHandle
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := lookup[*event](d, uintptr(h))
	if !ok {
		return out, driver.ErrorInvalidHandle
	}
	if e.state.flags&driver.EventInterprocess == 0 {
		return out, driver.ErrorInvalidValue
	}
	n := copy(out[:], ipcMagic)
	binary.LittleEndian.PutUint64(out[n:], uint64(os.Getpid()))
	binary.LittleEndian.PutUint64(out[n+8:], uint64(h))
	return out, driver.Success
}

func (d *Driver) IpcOpenEventHandle(in driver.IPCEventHandle) (driver.Event, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.currentCtx()
	if c == nil {
		return 0, driver.ErrorInvalidContext
	}
	n := len(ipcMagic)
	if string(in[:n]) != ipcMagic || binary.LittleEndian.Uint64(in[n:]) != uint64(os.Getpid()) {
		return 0, driver.ErrorInvalidValue
	}
	src, ok := lookup[*event](d, uintptr(binary.LittleEndian.Uint64(in[n+8:])))
	if !ok {
		return 0, driver.ErrorInvalidValue
	}
	e := &event{ctx: c, state: src.state, opened: true}
	e.handle = driver.Event(d.newHandle(e))
	return e.handle, driver.Success
}

func (d *Driver) ModuleLoadData(unsafe.Pointer) (driver.Module, driver.Result) {
	return 0, driver.ErrorNotSupported
}

func (d *Driver) ModuleUnload(driver.Module) driver.Result { return driver.ErrorInvalidHandle }

func (d *Driver) ModuleGetFunction(driver.Module, string) (driver.Function, driver.Result) {
	return 0, driver.ErrorInvalidHandle
}

func (d *Driver) LaunchKernel(driver.Context, driver.Function, uint32, uint32, uint32, uint32, uint32, uint32,
	uint32, driver.Stream, unsafe.Pointer) driver.Result {
	return driver.ErrorNotSupported
}

func (d *Driver) MemAlloc(bytes uint64) (driver.DevicePtr, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.currentCtx()
	if c == nil {
		return 0, driver.ErrorInvalidContext
	}
	if bytes == 0 {
		return 0, driver.ErrorInvalidValue
	}
	a := &allocation{ctx: c, buf: make([]byte, bytes)}
	h := d.nextAddr
	d.nextAddr += (uintptr(bytes) + 0xfff) &^ 0xfff
	d.objects[h] = a
	return driver.DevicePtr(h), driver.Success
}

func (d *Driver) MemFree(p driver.DevicePtr) driver.Result {
	return d.destroy(uintptr(p), func(o any) bool { _, ok := o.(*allocation); return ok })
}

// span finds the bytes [p, p+n) of one allocation. Caller holds d.mu.
func (d *Driver) span(p driver.DevicePtr, n uint64) (*allocation, []byte, driver.Result) {
	for base, o := range d.objects {
		a, ok := o.(*allocation)
		if !ok || uint64(p) < uint64(base) || uint64(p) >= uint64(base)+uint64(len(a.buf)) {
			continue
		}
		off := uint64(p) - uint64(base)
		if off+n > uint64(len(a.buf)) {
			return nil, nil, driver.ErrorInvalidValue
		}
		return a, a.buf[off : off+n], driver.Success
	}
	return nil, nil, driver.ErrorInvalidValue
}

func hostBytes(p unsafe.Pointer, n uint64) []byte { return unsafe.Slice((*byte)(p), n) }

// copyOn enqueues a copy on s, or on the legacy stream of the allocation's context and
// waits for it when s is nil (the synchronous copies).
func (d *Driver) copyOn(sh *driver.Stream, p driver.DevicePtr, n uint64, cp func(dev []byte)) driver.Result {
	d.mu.Lock()
	a, dev, r := d.span(p, n)
	if r != driver.Success {
		d.mu.Unlock()
		return r
	}
	s := a.ctx.legacy
	if sh != nil {
		if s, r = d.stream(*sh); r != driver.Success {
			d.mu.Unlock()
			return r
		}
	}
	done := d.submit(s, func() { cp(dev) })
	d.mu.Unlock()
	if sh == nil && done != nil {
		<-done
	}
	return driver.Success
}

func (d *Driver) MemcpyHtoD(dst driver.DevicePtr, src unsafe.Pointer, n uint64) driver.Result {
	return d.copyOn(nil, dst, n, func(dev []byte) { copy(dev, hostBytes(src, n)) })
}

func (d *Driver) MemcpyDtoH(dst unsafe.Pointer, src driver.DevicePtr, n uint64) driver.Result {
	return d.copyOn(nil, src, n, func(dev []byte) { copy(hostBytes(dst, n), dev) })
}

func (d *Driver) MemcpyHtoDAsync(dst driver.DevicePtr, src unsafe.Pointer, n uint64, s driver.Stream) driver.Result {
	return d.copyOn(&s, dst, n, func(dev []byte) { copy(dev, hostBytes(src, n)) })
}

func (d *Driver) MemcpyDtoHAsync(dst unsafe.Pointer, src driver.DevicePtr, n uint64, s driver.Stream) driver.Result {
	return d.copyOn(&s, src, n, func(dev []byte) { copy(hostBytes(dst, n), dev) })
}
