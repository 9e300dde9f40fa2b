package streams

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/streambridge/streambridge/internal/boundary"
	"github.com/streambridge/streambridge/internal/driver"
)

// EventOptions are the flags of cuEventCreate.
type EventOptions struct {
	DisableTiming bool // CU_EVENT_DISABLE_TIMING: cheaper record and wait, no ElapsedTime
	BlockingSync  bool // CU_EVENT_BLOCKING_SYNC: Synchronize sleeps instead of spinning
	Interprocess  bool // CU_EVENT_INTERPROCESS: shareable with IPCHandle; needs DisableTiming
}

func (o EventOptions) flags() uint32 {
	f := driver.EventDefault
	if o.DisableTiming {
		f |= driver.EventDisableTiming
	}
	if o.BlockingSync {
		f |= driver.EventBlockingSync
	}
	if o.Interprocess {
		f |= driver.EventInterprocess
	}
	return f
}

// IPCEventHandle is CUipcEventHandle: 64 bytes that name an interprocess event to another
// process.
type IPCEventHandle = driver.IPCEventHandle

// Event is a CUDA event. Close destroys it, unless it is borrowed ([Driver.WrapEvent]).
type Event struct {
	ctx    *Context // its driver's API is ctx.api: a field of its own would take the allocation from 48 to 64 bytes (so would a wider uses)
	handle driver.Event
	id     uint64 // a borrowed event's identity, checked before each use; 0 for an owned one
	uses   uses   // open, and the calls in flight: Close's destroy waits for the last (uses.go)
	// capturedIn is the serial of the capture, begun by BeginCapture, that took the last
	// record (Stream.counted), while that capture may go on (see notCaptured);
	// capturedLinked where the last record may be tied to a capture or its graph otherwise;
	// 0 for a record made while no capture of ours was counted.
	capturedIn atomic.Uint64
}

// NewEvent creates an event in c (cuEventCreate).
//
// It is inlined where it is called, so that an event its caller makes and closes without
// keeping it anywhere stays on the caller's stack: no method of an event hands it on.
func (c *Context) NewEvent(opts EventOptions) (*Event, error) {
	e := new(Event)
	if err := c.makeEvent(e, opts); err != nil {
		return nil, err
	}
	return e, nil
}

// makeEvent is NewEvent's driver call, counted on c, made into e.
func (c *Context) makeEvent(e *Event, opts EventOptions) error {
	if err := c.acquire(); err != nil {
		return err
	}
	h, r := c.api.EventCreate(c.handle, opts.flags())
	if err := c.drv.check("cuEventCreate", r); err != nil {
		c.release()
		return err
	}
	e.ctx, e.handle = c, h
	return nil
}

// OpenIPCEvent opens an event another process exported with [Event.IPCHandle]
// (cuIpcOpenEventHandle). Recording it in either process orders work in both.
func (c *Context) OpenIPCEvent(h IPCEventHandle) (*Event, error) {
	if err := c.valid(); err != nil {
		return nil, err
	}
	if err := c.acquire(); err != nil {
		return nil, err
	}
	var e driver.Event
	r := c.do(func() (r driver.Result) {
		e, r = c.api.IpcOpenEventHandle(h)
		return r
	})
	if err := c.drv.check("cuIpcOpenEventHandle", r); err != nil {
		c.release()
		return nil, err
	}
	return &Event{ctx: c, handle: e}, nil
}

// WrapEvent borrows an event handle that some other code created (a CUevent of PyTorch,
// CuPy, cuda.core, Numba or C), finding its context and so its device from the event
// object. Anything but a live event of a device's primary context (a garbage integer, a
// destroyed event, a stream handle) fails with [ErrInvalidHandle] before the driver, which
// would crash on it, sees it; so does every later use once the event is destroyed, also
// when its address names a new event. Close forgets the event; it never destroys it.
//
// Where the driver's layout cannot be learned nothing can be proven, and the wrap fails
// with [ErrNotSupported], unless [Vouched]: then the event is taken on the caller's word,
// in the primary context of the device [VouchedOn] states, else the calling thread's
// current context (device 0's primary context where none is current: the driver cannot
// say an event's context), and nothing is checked before each use.
func (d *Driver) WrapEvent(handle uintptr, opts ...WrapOption) (*Event, error) {
	c, id, err := d.foreignEvent(handle, opts)
	if err != nil {
		return nil, err
	}
	return &Event{ctx: c, handle: driver.Event(handle), id: id}, nil
}

// EventIdentity is the device and identity of a live event handle that some other code
// created, proven as [Driver.WrapEvent] proves it, keeping nothing: for a caller that keeps
// the handle itself and checks it before each use with [Driver.VerifyEvent].
func (d *Driver) EventIdentity(handle uintptr, opts ...WrapOption) (*Device, uint64, error) {
	c, id, err := d.foreignEvent(handle, opts)
	if err != nil {
		return nil, 0, err
	}
	return c.dev, id, nil
}

// VerifyEvent reports whether handle is still the live event whose identity
// [Driver.EventIdentity] (or a wrap) read: a destroyed event fails with
// [ErrInvalidHandle], also when its address now names a new event, before the driver sees
// it.
func (d *Driver) VerifyEvent(handle uintptr, id uint64) error {
	if err := d.valid(); err != nil {
		return err
	}
	if id == boundary.VouchedEventID { // taken on its wrapper's word: nothing to check
		return nil
	}
	ctx, got, r := d.api.EventCheck(driver.Event(handle))
	return still("event", boundary.EventGoneMessage, boundary.EventReusedMessage, handle, id, ctx, got, r)
}

// foreignEvent is the context and identity of an event handle some other code created,
// proven live before the driver sees it; or, vouched where nothing can be proven, taken in
// the current context with boundary.VouchedEventID.
func (d *Driver) foreignEvent(handle uintptr, opts []WrapOption) (*Context, uint64, error) {
	if err := d.valid(); err != nil {
		return nil, 0, err
	}
	if err := outsideHostFunc(); err != nil {
		return nil, 0, err
	}
	ctx, id, r := d.api.EventCheck(driver.Event(handle))
	h, id, err := checked("event", handle, ctx, id, r, vouchEventHint)
	if o := wrapOptionsOf(opts); errors.Is(err, ErrNotSupported) && o.vouched {
		h, err = d.vouchedContext(o.device)
		id = boundary.VouchedEventID
	}
	if err != nil {
		return nil, 0, err
	}
	c, err := d.borrowedContext(h)
	return c, id, err
}

// vouchEventHint is what an event handle that cannot be proven says of the way to take it anyway.
const vouchEventHint = "; where you know it is one and stays one while used, say so: in Go streams.Vouched(), in Python " +
	"pass the framework's own event object (as_event(torch_event)) or Event.from_handle(ptr, vouched=True)"

// vouchedContext is the context a vouched event is taken in: device's primary one where a
// device is stated (not -1); else the calling thread's current context, or device 0's
// primary one where none is current.
func (d *Driver) vouchedContext(device int) (driver.Context, error) {
	if device < 0 {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		c, r := d.api.CtxGetCurrent()
		if err := d.check("cuCtxGetCurrent", r); err != nil || c != 0 {
			return c, err
		}
		device = 0
	}
	dev, err := d.Device(device)
	if err != nil {
		return 0, err
	}
	pc, err := dev.PrimaryContext()
	if err != nil {
		return 0, err
	}
	defer pc.Close()
	return pc.handle, nil
}

// Owned reports whether Close destroys the event.
func (e *Event) Owned() bool { return e != nil && e.ctx != nil && e.id == 0 }

// proven reports whether e is borrowed with an identity to verify before each use (not
// owned, not vouched for).
func (e *Event) proven() bool { return e.id != 0 && e.id != boundary.VouchedEventID }

// Handle is the CUevent.
func (e *Event) Handle() uintptr {
	if e == nil {
		return 0
	}
	return uintptr(e.handle)
}

// Context is the event's context.
func (e *Event) Context() *Context {
	if e == nil {
		return nil
	}
	return e.ctx
}

// String shows the handle, device and driver.
func (e *Event) String() string {
	if e == nil || e.ctx == nil {
		return "Event(none)"
	}
	own := "owned"
	if e.id != 0 {
		own = "borrowed"
	}
	return fmt.Sprintf("Event(%#x, device %d, %s, %s driver)", e.handle, e.ctx.dev.dev, own, e.ctx.api.Name())
}

// use takes a use of e for one call (see uses): e is not nil, not closed, and, borrowed,
// still the event it was when wrapped. Every method that reaches the driver takes one
// first and gives it back (done) when the driver has answered.
func (e *Event) use() error { return e.useBy(goroutine()) }

// useBy is use for a call of goroutine g's (see uses.enter), given back with doneBy. An
// event of ours used by the goroutine that owns its uses, open, takes its use inline
// (uses.enterFast); every other case is useChecked's.
func (e *Event) useBy(g uintptr) error {
	if e != nil && e.id == 0 && e.ctx != nil && e.uses.enterFast(g) {
		return nil
	}
	return e.useChecked(g)
}

// useChecked is useBy's every case.
func (e *Event) useChecked(g uintptr) error {
	if e == nil {
		return ErrNil
	}
	if e.ctx == nil {
		return errZero("Event")
	}
	if settle, err := e.uses.take(g); err != nil {
		if settle {
			e.settle()
		}
		return err
	}
	if e.proven() {
		if err := e.ctx.drv.VerifyEvent(uintptr(e.handle), e.id); err != nil {
			e.doneBy(g)
			return err
		}
	}
	return nil
}

// done gives back a use taken by use.
func (e *Event) done() { e.doneBy(goroutine()) }

// doneBy gives back a use taken by useBy(g).
func (e *Event) doneBy(g uintptr) {
	if e.uses.drop(g) {
		e.settle()
	}
}

// settle destroys e where it is closed and no call is in flight, once: uses.settle, but
// with e's own destroy, so that no method of an event hands it to an interface (see
// uses.take).
func (e *Event) settle() {
	if e.uses.claimDestroy() {
		_ = e.destroy()
	}
}

// recorded notes where the record just made on s went: into a capture of ours that may go
// on, or not. While no capture of ours may go on, it costs two loads. A record made while
// one is counted on another stream may have gone into it through a join: it is noted as
// linked (capturedLinked), which the capture lock heeds and a query does not refuse.
// The caller holds the capture lock (lockOp), so that the count does not change under it.
func (e *Event) recorded(s *Stream) {
	if s.ctx.drv.capturing.Load() == 0 {
		if e.capturedIn.Load() != 0 {
			e.capturedIn.Store(0)
		}
	} else if serial := s.counted.Load(); serial != 0 {
		e.capturedIn.Store(serial)
	} else {
		e.capturedIn.Store(capturedLinked)
	}
}

// linked reports whether e's last record may be tied to a capture or to the graph it
// became (capturedIn): its calls take the capture lock whole (capturelock.go).
func (e *Event) linked() bool { return e.capturedIn.Load() != 0 }

// capturedLinked is Event.capturedIn for a record that may have gone into a capture, of
// ours or joined, and that no query is refused for: one made while a capture of ours was
// counted on another stream, or whose capture has ended (its graph may hold it).
const capturedLinked = ^uint64(0)

// notCaptured refuses a query or synchronize (what) of e while its last record is in a
// capture of ours that goes on, and returns the capturedIn it answered for. The caller
// takes the capture lock and queries only where capturedIn is still that: a record into a
// capture in between (Event.recorded, under the capture lock, whole while a capture of ours
// is counted) had the query reach the captured event, which the driver refuses,
// invalidating the capture (TestEventQueriesRacingCapturesNeverInvalidateThem).
func (e *Event) notCaptured(what string) (uint64, error) {
	serial := e.capturedIn.Load()
	if serial == 0 || serial == capturedLinked {
		return serial, nil
	}
	capturing := false
	if on := e.ctx.drv.countedStream(serial); on != nil && on.use() == nil { // else ended, or closed with it
		var err error
		capturing, err = on.capturingNow()
		on.done()
		if err != nil {
			return 0, err
		}
	}
	if !capturing {
		e.capturedIn.CompareAndSwap(serial, capturedLinked) // ended: linked to its graph until recorded again
		return capturedLinked, nil                          // where the swap failed, a record since: the caller asks again
	}
	return 0, fmt.Errorf("streambridge: %s of %s, whose last record was captured into a graph while the capture goes on: %w (the driver would invalidate the capture)", what, e.String(), ErrCapturing)
}

// Record records the event on s (cuEventRecord); see [Stream.Record].
func (e *Event) Record(s *Stream) error {
	if s == nil {
		return ErrNil
	}
	return s.Record(e)
}

// Query reports whether the work captured by the last record has completed
// (cuEventQuery). An event never recorded is complete. While the last record is in a
// capture that BeginCapture began and that goes on, it fails with [ErrCapturing]: the
// driver refuses such a query in every capture mode and invalidates the capture.
func (e *Event) Query() (bool, error) {
	if err := e.use(); err != nil {
		return false, err
	}
	defer e.done()
	d := e.ctx.drv
	var r driver.Result
	for r = resultRecordedAgain; r == resultRecordedAgain; {
		asked, err := e.notCaptured("a query (cuEventQuery)")
		if err != nil {
			return false, err
		}
		lock := d.lockOp(uintptr(e.handle), e.linked())
		r = e.queryHeld(asked)
		d.unlockOp(lock)
	}
	switch r {
	case driver.Success:
		return true, nil
	case driver.ErrorNotReady:
		return false, nil
	default:
		return false, e.checkRecorded("cuEventQuery", r)
	}
}

// checkRecorded is check for a call given e (a query, a synchronize, a stream's wait): its
// CUDA_ERROR_INVALID_VALUE, where e's last record may have gone into a capture
// (capturedIn), says why (boundary.CapturedEventHint).
func (e *Event) checkRecorded(call string, r driver.Result) error {
	err := e.ctx.drv.check(call, r)
	if ce, ok := err.(*CallError); ok && r == driver.ErrorInvalidValue && e.capturedIn.Load() != 0 {
		ce.Hint = boundary.CapturedEventHint
	}
	return err
}

// Synchronize waits for the last record to complete, as cuEventSynchronize, by queries
// (Driver.wait). From inside a host function it fails with [ErrInHostFunc]; while the last
// record is in a capture that BeginCapture began and that goes on, with [ErrCapturing], as
// Query.
func (e *Event) Synchronize() error {
	if err := e.use(); err != nil {
		return err
	}
	defer e.done()
	d := e.ctx.drv
	for {
		asked, err := e.notCaptured("a synchronize (cuEventSynchronize)")
		if err != nil {
			return err
		}
		r := d.wait(uintptr(e.handle), e, func(bool) driver.Result { return e.queryHeld(asked) })
		if r != resultRecordedAgain {
			return e.checkRecorded("cuEventSynchronize", r)
		}
	}
}

// queryHeld is e's query, made holding the capture lock (lockOp), where e's capturedIn is
// still what notCaptured answered for (asked); else resultRecordedAgain, and the caller
// asks again.
func (e *Event) queryHeld(asked uint64) driver.Result {
	if e.capturedIn.Load() != asked {
		return resultRecordedAgain
	}
	return e.ctx.api.EventQuery(e.handle)
}

// ElapsedTime is the time from e's completion to end's (cuEventElapsedTime), with the
// driver's resolution of about half a microsecond. Both must have timing enabled and
// completed records.
func (e *Event) ElapsedTime(end *Event) (time.Duration, error) {
	if err := e.use(); err != nil {
		return 0, err
	}
	defer e.done()
	if err := end.use(); err != nil {
		return 0, err
	}
	defer end.done()
	if end.ctx.api != e.ctx.api {
		return 0, ErrWrongDriver
	}
	lock := e.ctx.drv.lockOp(uintptr(e.handle), e.linked())
	ms, r := e.ctx.api.EventElapsedTime(e.handle, end.handle)
	e.ctx.drv.unlockOp(lock)
	if err := e.ctx.drv.check("cuEventElapsedTime", r); err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// IPCHandle exports an event made with Interprocess (cuIpcGetEventHandle).
func (e *Event) IPCHandle() (IPCEventHandle, error) {
	if err := e.use(); err != nil {
		return IPCEventHandle{}, err
	}
	defer e.done()
	var h IPCEventHandle
	r := e.ctx.do(func() (r driver.Result) { // the driver wants the event's context current
		h, r = e.ctx.api.IpcGetEventHandle(e.handle)
		return r
	})
	return h, e.ctx.drv.check("cuIpcGetEventHandle", r)
}

// Disown closes e without destroying the CUevent and returns it: the caller owns it from
// now on and destroys it with cuEventDestroy (Python's events are owned so by the C core).
// 0 if e was closed. It fails while a call on e is in flight on another goroutine: the new
// owner could destroy the event under it. The error is otherwise that of releasing e's
// count on its context.
func (e *Event) Disown() (uintptr, error) {
	if e == nil {
		return 0, ErrNil
	}
	if e.ctx == nil {
		return 0, errZero("Event")
	}
	if e.id != 0 {
		return 0, fmt.Errorf("streambridge: %s is borrowed: it is not this package's to give away", e.String())
	}
	if !e.uses.claim() {
		if e.uses.closed() {
			return 0, nil
		}
		return 0, fmt.Errorf("streambridge: %s is in use on another goroutine: it cannot be given away now", e.String())
	}
	return uintptr(e.handle), e.ctx.release() // the new owner keeps the context retained as long as the event lives
}

// Close destroys the event (cuEventDestroy); a borrowed one is only forgotten. It is
// idempotent. A call on e in flight on another goroutine keeps the event until it returns
// (the last one destroys it, and its error is lost); calls begun after Close fail with
// [ErrClosed].
func (e *Event) Close() error {
	if e == nil {
		return ErrNil
	}
	if e.ctx == nil {
		return errZero("Event")
	}
	// uses.close, with e's own destroy (see uses.take)
	switch _, destroy := e.uses.shut(); {
	case !destroy || e.id != 0:
		return nil
	case driver.InHostFunc():
		go e.ctx.destroyEvent(e.handle, e.linked())
		return nil
	}
	return e.ctx.destroyEvent(e.handle, e.linked())
}

// destroy destroys an owned event and releases its context's count; the last use of a
// closed e calls it, once (see uses). A borrowed event's context is borrowed too: nothing
// to release.
func (e *Event) destroy() error {
	if e.id != 0 {
		return nil
	}
	return e.ctx.destroyEvent(e.handle, e.linked())
}

// destroyEvent destroys an event of c's and releases its count on c. linked: it was
// recorded while a capture of ours was counted (Event.capturedIn), and may be tied to one or
// to the graph it became, so it is destroyed with the capture lock whole.
func (c *Context) destroyEvent(h driver.Event, linked bool) error {
	d := c.drv
	fence := false
	if d.fenceCount.Load() > 0 {
		_, fence = d.fences.Load(uintptr(h))
	}
	if fence { // a fence's destroy and its forgetting are one step against a new fence at the address
		d.fenceMade.Lock()
		defer d.fenceMade.Unlock()
	}
	lock := d.lockOp(uintptr(h), linked)
	r := c.api.EventDestroy(h)
	d.unlockOp(lock)
	if fence {
		d.fences.Delete(uintptr(h))
		d.fenceCount.Add(-1)
	}
	err := d.check("cuEventDestroy", r)
	if e2 := c.release(); err == nil {
		err = e2
	}
	return err
}
