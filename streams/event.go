package streams

import (
	"fmt"
	"sync/atomic"
	"time"

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

// Event is a CUDA event. Close destroys it.
type Event struct {
	ctx    *Context
	api    driver.API
	handle driver.Event
	closed atomic.Bool
}

// NewEvent creates an event in c (cuEventCreate).
func (c *Context) NewEvent(opts EventOptions) (*Event, error) {
	if err := c.acquire(); err != nil {
		return nil, err
	}
	h, r := c.api.EventCreate(c.handle, opts.flags())
	if err := c.drv.check("cuEventCreate", r); err != nil {
		c.release()
		return nil, err
	}
	return &Event{ctx: c, api: c.api, handle: h}, nil
}

// OpenIPCEvent opens an event another process exported with [Event.IPCHandle]
// (cuIpcOpenEventHandle). Recording it in either process orders work in both.
func (c *Context) OpenIPCEvent(h IPCEventHandle) (*Event, error) {
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
	return &Event{ctx: c, api: c.api, handle: e}, nil
}

// Handle is the CUevent.
func (e *Event) Handle() uintptr { return uintptr(e.handle) }

// Context is the event's context.
func (e *Event) Context() *Context { return e.ctx }

// String shows the handle, device and driver.
func (e *Event) String() string {
	return fmt.Sprintf("Event(%#x, device %d, %s driver)", e.handle, e.ctx.dev.dev, e.api.Name())
}

func (e *Event) live() error {
	if e == nil {
		return ErrNil
	}
	if e.closed.Load() {
		return ErrClosed
	}
	return nil
}

// Record records the event on s (cuEventRecord); see [Stream.Record].
func (e *Event) Record(s *Stream) error {
	if s == nil {
		return ErrNil
	}
	return s.Record(e)
}

// Query reports whether the work captured by the last record has completed
// (cuEventQuery). An event never recorded is complete.
func (e *Event) Query() (bool, error) {
	if err := e.live(); err != nil {
		return false, err
	}
	switch r := e.api.EventQuery(e.handle); r {
	case driver.Success:
		return true, nil
	case driver.ErrorNotReady:
		return false, nil
	default:
		return false, e.ctx.drv.check("cuEventQuery", r)
	}
}

// Synchronize waits for the last record to complete (cuEventSynchronize). From inside a
// host function it fails with [ErrInHostFunc].
func (e *Event) Synchronize() error {
	if err := e.live(); err != nil {
		return err
	}
	if driver.InHostFunc() {
		return ErrInHostFunc
	}
	return e.ctx.drv.check("cuEventSynchronize", e.api.EventSynchronize(e.handle))
}

// ElapsedTime is the time from e's completion to end's (cuEventElapsedTime), with the
// driver's resolution of about half a microsecond. Both must have timing enabled and
// completed records.
func (e *Event) ElapsedTime(end *Event) (time.Duration, error) {
	if err := e.live(); err != nil {
		return 0, err
	}
	if err := end.live(); err != nil {
		return 0, err
	}
	if end.api != e.api {
		return 0, ErrWrongDriver
	}
	ms, r := e.api.EventElapsedTime(e.handle, end.handle)
	if err := e.ctx.drv.check("cuEventElapsedTime", r); err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// IPCHandle exports an event made with Interprocess (cuIpcGetEventHandle).
func (e *Event) IPCHandle() (IPCEventHandle, error) {
	if err := e.live(); err != nil {
		return IPCEventHandle{}, err
	}
	var h IPCEventHandle
	r := e.ctx.do(func() (r driver.Result) { // the driver wants the event's context current
		h, r = e.api.IpcGetEventHandle(e.handle)
		return r
	})
	return h, e.ctx.drv.check("cuIpcGetEventHandle", r)
}

// Disown closes e without destroying the CUevent and returns it: the caller owns it from
// now on and destroys it with cuEventDestroy (Python's events are owned so by the C core).
// 0 if e was closed. The error is that of releasing e's count on its context.
func (e *Event) Disown() (uintptr, error) {
	if e.closed.Swap(true) {
		return 0, nil
	}
	return uintptr(e.handle), e.ctx.release() // the new owner keeps the context retained as long as the event lives
}

// Close destroys the event (cuEventDestroy). It is idempotent.
func (e *Event) Close() error {
	if e.closed.Swap(true) {
		return nil
	}
	err := e.ctx.drv.check("cuEventDestroy", e.api.EventDestroy(e.handle))
	if e2 := e.ctx.release(); err == nil {
		err = e2
	}
	return err
}
