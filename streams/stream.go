package streams

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/streambridge/streambridge/internal/boundary"
	"github.com/streambridge/streambridge/internal/driver"
)

// Special stream handles, as the driver API defines them.
const (
	NullStream      uintptr = 0 // the legacy default stream of the current context
	LegacyStream    uintptr = 1 // CU_STREAM_LEGACY
	PerThreadStream uintptr = 2 // CU_STREAM_PER_THREAD
)

// StreamOptions are the arguments of cuStreamCreateWithPriority.
type StreamOptions struct {
	// NonBlocking streams do not synchronize with the legacy default stream
	// (CU_STREAM_NON_BLOCKING).
	NonBlocking bool
	// Priority: lower numbers are higher priority; 0 is the default, the least. One
	// outside [Context.StreamPriorityRange] fails with [ErrPriority] (the driver would
	// clamp it silently).
	Priority int
}

// Stream is a CUDA stream: one this package created and owns, or a borrowed handle that
// some other library created (including the special handles 0, 1 and 2).
type Stream struct {
	ctx    *Context
	api    driver.API
	handle driver.Stream
	owned  bool
	uses   uses // open, and the calls in flight: Close's destroy waits for the last (uses.go)
	// thread is, for a wrapper of the per-thread default stream (handle 2), the OS thread it
	// was wrapped on, whose per-thread stream it means; every use must come from there.
	thread int32
	// counted: a capture BeginCapture began here may be going on (see Driver.capturing):
	// its serial (Driver.counting), else 0.
	counted atomic.Uint64
	// capturer is the OS thread that began a capture in global or thread-local mode, which
	// BeginCapture keeps its goroutine locked to until EndCapture; 0 when none.
	capturer atomic.Int32
	// began is the driver's id of the capture BeginCapture began here, until EndCapture; 0
	// when none. An owned stream closed in the middle of it ends it first (endLostCapture).
	began atomic.Uint64
	// vouched: wrapped on its caller's word (Vouched), counted in Driver.vouched while open.
	vouched bool
	// id is a borrowed stream object's cuStreamGetId when it was wrapped: its identity. A
	// destroyed stream's address can come back as a new stream's; every use checks that
	// the handle is still a live stream with this id (see Driver.VerifyStream). 0 for
	// owned streams and the special handles, which need no such check.
	id uint64
	// owner is, for a wrapper of the handle of a stream this package created, that stream:
	// each call on the wrapper takes a use of it too, so the owner's Close cannot destroy
	// the handle under the call (once it is closed, the wrapper's calls fail as those on a
	// destroyed borrowed stream do, with ErrInvalidHandle).
	owner *Stream

	// fence is an event this package records on the stream so that other streams can
	// wait for it ([Stream.WaitStream]); made on first use.
	fenceMu sync.Mutex
	fence   atomic.Pointer[Event]
}

// ErrPriority is matched (errors.Is) by a stream priority outside the device's range.
var ErrPriority = errors.New("streambridge: stream priority out of range")

// NewStream creates a stream in c (cuStreamCreateWithPriority). Close destroys it.
func (c *Context) NewStream(opts StreamOptions) (*Stream, error) {
	if err := c.valid(); err != nil {
		return nil, err
	}
	flags := driver.StreamDefault
	if opts.NonBlocking {
		flags = driver.StreamNonBlocking
	}
	if opts.Priority != 0 {
		least, greatest, err := c.StreamPriorityRange()
		if err != nil {
			return nil, err
		}
		if opts.Priority > least || opts.Priority < greatest {
			return nil, fmt.Errorf("%w: %d is outside device %d's range, %d (the highest) to %d (the lowest)",
				ErrPriority, opts.Priority, c.dev.Ordinal(), greatest, least)
		}
	}
	if err := c.acquire(); err != nil {
		return nil, err
	}
	d := c.drv
	d.oursMu.Lock()
	defer d.oursMu.Unlock()
	h, r := c.api.StreamCreateWithPriority(c.handle, flags, opts.Priority)
	if err := d.check("cuStreamCreateWithPriority", r); err != nil {
		c.release()
		return nil, err
	}
	s := &Stream{ctx: c, api: c.api, handle: h, owned: true}
	d.ours[h] = s
	return s, nil
}

// identifyOwned is identify, and the stream of ours whose handle h is (nil for another
// library's), read in one step against our creates and destroys (oursMu). The check is
// made before oursMu is taken, as the first check may learn the layout, making streams,
// which may wait (driver.AroundWait) and must not hold up a create or a destroy
// of ours; it refuses what is not a stream. Where h is ours, the check is made again under
// oursMu: the stream proven must be that one (a stream of ours made at h meanwhile, where
// another was destroyed, has another identity).
func (d *Driver) identifyOwned(h driver.Stream) (driver.Context, uint64, *Stream, error) {
	ctx, id, err := d.identify(h)
	if err != nil {
		return ctx, id, nil, err
	}
	d.oursMu.Lock()
	defer d.oursMu.Unlock()
	owner := d.ours[h]
	if owner == nil {
		return ctx, id, nil, nil
	}
	ctx, id, err = d.identify(h)
	return ctx, id, owner, err
}

// WrapStream borrows a stream handle that belongs to c. The special handles 0, 1 and 2
// mean c's legacy default stream, CU_STREAM_LEGACY and c's per-thread default stream. The
// per-thread stream is an OS thread's, and a goroutine moves between threads: a wrapper of
// 2 means the per-thread stream of the thread it was wrapped on, and a call on it from any
// other thread fails with [ErrWrongThread] (lock the goroutine first with
// runtime.LockOSThread, and keep it locked while you use the wrapper). Any other handle must be a live stream of c; anything else (a garbage integer, a destroyed
// stream, another kind of handle) fails with [ErrInvalidHandle] before the driver, which
// would crash on it, sees it.
func (c *Context) WrapStream(handle uintptr) (*Stream, error) {
	if err := c.acquire(); err != nil {
		return nil, err
	}
	s, err := c.wrapStream(handle)
	if err != nil {
		c.release()
	}
	return s, err
}

func (c *Context) wrapStream(handle uintptr) (*Stream, error) {
	s := &Stream{ctx: c, api: c.api, handle: driver.Stream(handle)}
	if s.handle == driver.StreamPerThread {
		s.thread = int32(syscall.Gettid())
	}
	if s.handle.IsSpecial() {
		return s, nil
	}
	ctx, id, owner, err := c.drv.identifyOwned(s.handle)
	if err != nil {
		return nil, err
	}
	if ctx != c.handle {
		return nil, fmt.Errorf("streambridge: stream %#x belongs to context %#x, not %#x", handle, ctx, c.handle)
	}
	s.id, s.owner = id, owner
	return s, nil
}

// WrapStream borrows a stream handle that some other code created, finding its context
// (and so its device) from the handle itself. Special handles (0, 1, 2) name no context;
// wrap them with [Context.WrapStream]. Anything but a live stream fails with
// [ErrInvalidHandle] before the driver sees it. On a driver whose layout cannot be learned
// nothing can be proven, and the wrap fails with an error matching [ErrNotSupported],
// unless the caller vouches for the handle ([Vouched]).
func (d *Driver) WrapStream(handle uintptr, opts ...WrapOption) (*Stream, error) {
	c, id, owner, err := d.foreignContext(handle, opts)
	if err != nil {
		return nil, err
	}
	s := &Stream{ctx: c, api: d.api, handle: driver.Stream(handle), id: id, vouched: wrapOptionsOf(opts).vouched, owner: owner}
	if s.vouched {
		d.vouch(s.handle, 1)
	}
	return s, nil
}

// vouch counts a wrapper taken on its caller's word open (by 1) or closed (-1).
func (d *Driver) vouch(h driver.Stream, by int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.vouched[h] += by; d.vouched[h] <= 0 {
		delete(d.vouched, h)
	}
}

// vouchedFor is whether an open wrapper of h was taken on its caller's word.
func (d *Driver) vouchedFor(h driver.Stream) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.vouched[h] > 0
}

// StreamIdentity is the device and identity (cuStreamGetId) of a live stream handle that
// some other code created, proven as [Driver.WrapStream] proves it, keeping nothing: for a
// caller that keeps the handle itself and checks it before each use with
// [Driver.VerifyStream]. The identity of a vouched handle that could not be proven is 0:
// there is nothing to check.
func (d *Driver) StreamIdentity(handle uintptr, opts ...WrapOption) (*Device, uint64, error) {
	c, id, _, err := d.foreignContext(handle, opts)
	if err != nil {
		return nil, 0, err
	}
	return c.dev, id, nil
}

// WrapOption is an option of [Driver.WrapStream] and [Driver.StreamIdentity].
type WrapOption func(*wrapOptions)

type wrapOptions struct {
	vouched bool
	device  int // VouchedOn's; -1: the current context's
}

// Vouched is the caller's word that the handle is a live stream and stays one while the
// wrapper is used: another framework's stream object kept alive with the wrapper, say.
// Where the driver's layout is known, the handle is proven as ever, so a wrong word is
// still refused; where it cannot be learned, the handle is taken on that word, its context
// asked of the driver (cuStreamGetCtx_v2), and no identity is checked before each use. While
// the wrapper is open, other wraps of the handle are taken on the same word (a Go function
// that Python hands the handle of such a stream, as an integer, wraps it so).
func Vouched() WrapOption { return func(o *wrapOptions) { o.vouched = true } }

// VouchedOn is [Vouched], with the device the handle is on: where the layout cannot be
// learned, an event (whose context the driver cannot be asked) is taken on that device's
// primary context rather than the calling thread's current one. A stream's device is read
// from the handle or asked of the driver, as with Vouched.
func VouchedOn(ordinal int) WrapOption {
	return func(o *wrapOptions) { o.vouched, o.device = true, ordinal }
}

// VerifyStream reports whether handle is still the live stream whose identity
// [Driver.StreamIdentity] (or a wrap) read: a handle whose stream was destroyed fails with
// [ErrInvalidHandle], also when its address now belongs to a new stream, before the driver
// sees it.
func (d *Driver) VerifyStream(handle uintptr, id uint64) error {
	if err := d.valid(); err != nil {
		return err
	}
	ctx, got, r := d.api.StreamCheck(driver.Stream(handle))
	return still("stream", boundary.StreamGoneMessage, boundary.StreamReusedMessage, handle, id, ctx, got, r)
}

// still is what the verification of a borrowed object (a stream or an event, by what) says
// of its check's answer: nil while handle is still the live object of identity id; else
// the error, in the words of gone or, where its address names a new object, reused.
func still(what, gone, reused string, handle uintptr, id uint64, ctx driver.Context, got uint64, r driver.Result) error {
	_, _, err := checked(what, handle, ctx, got, r, "")
	if err, ok := err.(*CallError); ok && err.Result == driver.ErrorInvalidHandle {
		// it was a live one when wrapped: it has been destroyed since
		return &CallError{Call: what + " check", Result: err.Result, Hint: fmt.Sprintf(gone, handle)}
	}
	if err != nil {
		return err
	}
	if got != id {
		return &CallError{Call: what + " check", Result: driver.ErrorInvalidHandle,
			Hint: fmt.Sprintf(reused, handle, got, id)}
	}
	return nil
}

// foreignContext is the context and identity of a stream handle some other code created,
// proven live before the driver sees it, and the stream of ours it is, if it is one (see
// Stream.owner). Special handles (0, 1, 2) name no context.
func (d *Driver) foreignContext(handle uintptr, opts []WrapOption) (*Context, uint64, *Stream, error) {
	if err := d.valid(); err != nil {
		return nil, 0, nil, err
	}
	if err := outsideHostFunc(); err != nil {
		return nil, 0, nil, err
	}
	if driver.Stream(handle).IsSpecial() {
		return nil, 0, nil, fmt.Errorf("streambridge: stream handle %d is a per-context default stream and names no context; wrap it with Context.WrapStream", handle)
	}
	h, id, owner, err := d.identifyOwned(driver.Stream(handle))
	if errors.Is(err, ErrNotSupported) && (wrapOptionsOf(opts).vouched || d.vouchedFor(driver.Stream(handle))) {
		h, err = d.vouchedStreamContext(driver.Stream(handle))
		id = 0
	}
	if err != nil {
		return nil, 0, nil, err
	}
	c, err := d.borrowedContext(h)
	return c, id, owner, err
}

// vouchedStreamContext is the context of a stream taken on its caller's word, asked of the
// driver: cuStreamGetCtx_v2, which leaves a capture on the stream alone (H100, driver 580),
// and answers a green context's stream with the primary context it was made from. A
// vouched stream is often wrapped inside its framework's capture (torch.cuda.graph), where
// cuStreamGetCtx is refused and invalidates the capture (seen on an H100): a driver before
// CUDA 12.5, which has only that, is asked so.
func (d *Driver) vouchedStreamContext(h driver.Stream) (driver.Context, error) {
	ctx, _, r := d.api.StreamGetCtx2(h)
	if r != driver.ErrorNotSupported {
		return ctx, d.check("cuStreamGetCtx_v2", r)
	}
	ctx, r = d.api.StreamGetCtx(h)
	return ctx, d.check("cuStreamGetCtx", r)
}

func wrapOptionsOf(opts []WrapOption) wrapOptions {
	o := wrapOptions{device: -1}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// identify refuses a handle that is not a live stream, without the driver touching it,
// and returns a live one's context and identity (the value of cuStreamGetId, unique among
// the process's streams for its life), read by the check rather than asked of the driver:
// cuStreamGetId fails on a capturing stream and invalidates the capture.
func (d *Driver) identify(h driver.Stream) (driver.Context, uint64, error) {
	ctx, id, r := d.api.StreamCheck(h)
	return checked("stream", uintptr(h), ctx, id, r, vouchHint)
}

// vouchHint is what a stream handle that cannot be proven says of the way to take it anyway.
const vouchHint = "; where you know it is one and stays one while used, say so: in Go streams.Vouched(), in Python " +
	"pass the framework's own stream object (as_stream(torch_stream)), or say it: as_stream(obj, vouched=True), ExternalStream(ptr, vouched=True)"

// checked turns a handle check's answer (StreamCheck, EventCheck: what names the kind)
// into the context and identity, or the error that says why the handle was refused.
// unproven ends the hint where the handle cannot be proven (the layout not learned).
func checked(what string, h uintptr, ctx driver.Context, id uint64, r driver.Result, unproven string) (driver.Context, uint64, error) {
	switch r {
	case driver.Success:
		return ctx, id, nil
	case driver.ErrorNotSupported:
		return 0, 0, &CallError{Call: what + " check", Result: r,
			Hint: fmt.Sprintf("this driver's %s layout could not be learned, so %#x cannot be proven a live %s%s", what, h, what, unproven)}
	case driver.ErrorInvalidContext:
		return 0, 0, &CallError{Call: what + " check", Result: r,
			Hint: fmt.Sprintf("%#x is a live CUDA %s of context %#x, which is neither a device's primary context nor a green context made "+
				"from one as the driver says (one made with cuCtxCreate, say; a driver before CUDA 12.5 cannot say): streambridge's "+
				"events and kernels live in primary contexts, and the driver lets no stream of such a context use them; make the %s "+
				"in the device's primary context or a green context", h, what, ctx, what)}
	default:
		return 0, 0, &CallError{Call: what + " check", Result: r,
			Hint: fmt.Sprintf("%#x is not a live CUDA %s; it was not passed to the driver", h, what)}
	}
}

// Handle is the CUstream, as other libraries take it.
func (s *Stream) Handle() uintptr {
	if s == nil {
		return 0
	}
	return uintptr(s.handle)
}

// Context is the stream's context.
func (s *Stream) Context() *Context {
	if s == nil {
		return nil
	}
	return s.ctx
}

// Device is the stream's device.
func (s *Stream) Device() *Device {
	if s == nil || s.ctx == nil {
		return nil
	}
	return s.ctx.dev
}

// Owned reports whether Close destroys the stream.
func (s *Stream) Owned() bool { return s != nil && s.owned }

// String shows the handle, device, ownership and driver.
func (s *Stream) String() string {
	if s == nil || s.ctx == nil {
		return "Stream(none)"
	}
	own := "borrowed"
	if s.owned {
		own = "owned"
	}
	return fmt.Sprintf("Stream(%#x, device %d, %s, %s driver)", s.handle, s.ctx.dev.dev, own, s.api.Name())
}

// callCtx is the context the frequent calls pass to the driver, which makes it current
// inside the same call: the stream's for a special handle, whose meaning depends on it;
// none for a stream object, which carries its own (a check and switch would cost about a
// sixth of a cuStreamQuery, measured on an H200).
func (s *Stream) callCtx() driver.Context {
	if s.handle.IsSpecial() {
		return s.ctx.handle
	}
	return 0
}

// runLocked is run under the capture lock (capturelock.go), for a call that hands s's
// handle to the driver and uses no event.
func (s *Stream) runLocked(fn func() driver.Result) driver.Result {
	lock := s.ctx.drv.lockOp(uintptr(s.handle), false)
	defer s.ctx.drv.unlockOp(lock)
	return s.run(fn)
}

// run calls driver functions on the stream that take no context: directly for a stream
// object, and on a locked thread with the stream's context current for a special handle.
func (s *Stream) run(fn func() driver.Result) driver.Result {
	if s.handle.IsSpecial() {
		return s.ctx.do(fn)
	}
	return fn()
}

// use takes a use of s for one call (see uses): s is not nil, not closed, and, borrowed,
// still the stream it was when wrapped. Every method that reaches the driver takes one
// first and gives it back (done) when the driver has answered, so a Close on another
// goroutine cannot destroy the handle under the call.
func (s *Stream) use() error { return s.useBy(goroutine()) }

// useBy is use for a call of goroutine g's (see uses.enter), given back with doneBy. A
// stream of ours used by the goroutine that owns its uses, open, takes its use inline
// (uses.enterFast); every other case is useChecked's.
func (s *Stream) useBy(g uintptr) error {
	if s != nil && s.owned && s.uses.enterFast(g) {
		return nil
	}
	return s.useChecked(g)
}

// useChecked is useBy's every case.
func (s *Stream) useChecked(g uintptr) error {
	if s == nil {
		return ErrNil
	}
	if s.ctx == nil {
		return errZero("Stream")
	}
	if err := s.uses.enter(s, g); err != nil {
		return err
	}
	if s.thread != 0 {
		runtime.LockOSThread() // the call's driver calls stay on the thread checked here
		if tid := int32(syscall.Gettid()); tid != s.thread {
			s.doneBy(g)
			return fmt.Errorf("%w: the per-thread default stream wrapped on OS thread %d was used from thread %d, whose per-thread stream is another; "+
				"lock the goroutine to its thread (runtime.LockOSThread) before wrapping handle 2 and while using it, or make a stream of your own",
				ErrWrongThread, s.thread, tid)
		}
	}
	if s.owner != nil { // the owner's use keeps the handle alive: the check and the use are one step
		if err := s.owner.useBy(g); err != nil {
			s.uses.leave(s, g)
			if errors.Is(err, ErrClosed) { // as a borrowed stream another library destroyed is refused
				return &CallError{Call: "stream check", Result: driver.ErrorInvalidHandle,
					Hint: fmt.Sprintf(boundary.StreamGoneMessage, uintptr(s.handle)) + " (its owner, a streambridge stream, was closed)"}
			}
			return err
		}
	} else if s.id != 0 {
		if err := s.ctx.drv.VerifyStream(uintptr(s.handle), s.id); err != nil {
			s.doneBy(g)
			return err
		}
	}
	if s.handle < driver.StreamPerThread { // 0 and 1: the legacy stream
		if err := s.legacyUsable(); err != nil {
			s.doneBy(g)
			return err
		}
	}
	return nil
}

// legacyUsable refuses the legacy stream while a blocking stream of its context captures
// ([ErrCapturing]). The legacy stream synchronizes with every blocking stream, so the
// driver refuses any use of it then, in every capture mode, and invalidates that capture;
// cuStreamGetCaptureInfo alone answers CUDA_ERROR_STREAM_CAPTURE_IMPLICIT and leaves the
// capture alone, so it is asked before each use.
func (s *Stream) legacyUsable() error {
	lock := s.ctx.drv.lockOp(uintptr(s.handle), false)
	_, _, r := s.api.StreamGetCaptureInfo(s.callCtx(), s.handle)
	s.ctx.drv.unlockOp(lock)
	if r == driver.ErrorCaptureImplicit {
		return fmt.Errorf("streambridge: the legacy default stream while a blocking stream of its context captures a graph: %w "+
			"(the driver refuses its use and would invalidate that capture; use a non-blocking stream, or wait for the capture to end)", ErrCapturing)
	}
	return s.ctx.drv.check("cuStreamGetCaptureInfo", r)
}

// done gives back a use taken by use.
func (s *Stream) done() { s.doneBy(goroutine()) }

// doneBy gives back a use taken by useBy(g).
func (s *Stream) doneBy(g uintptr) {
	if s.thread != 0 {
		runtime.UnlockOSThread()
	} else if s.owner != nil {
		s.owner.doneBy(g)
	}
	if s.uses.drop(g) {
		s.uses.settle(s)
	}
}

// useWith takes a use of s, which must belong to driver d, so that an object of d's can be
// used on it. (Drivers compare as pointers: comparing their APIs, interfaces, costs a
// runtime call, a sixth of the streams layer's time around a record and a wait.)
func (s *Stream) useWith(d *Driver) error { return s.useWithBy(d, goroutine()) }

// useWithBy is useWith for a call of goroutine g's, given back with doneBy.
func (s *Stream) useWithBy(d *Driver, g uintptr) error {
	if err := s.useBy(g); err != nil {
		return err
	}
	if s.ctx.drv != d {
		s.doneBy(g)
		return ErrWrongDriver
	}
	return nil
}

// useWithEvent takes a use of s and of e, for a call on both: both open, of one driver.
// Both are given back with doneWithEvent. Where both are ours and of one driver, each is
// taken as useBy takes it, inline where its goroutine owns it (a refusal of enterFast goes
// on to that object's useChecked, as enterFast asks).
func (s *Stream) useWithEvent(e *Event, g uintptr) error {
	if s != nil && e != nil && s.owned && e.id == 0 && e.ctx != nil && s.ctx.drv == e.ctx.drv {
		if !s.uses.enterFast(g) {
			if err := s.useChecked(g); err != nil {
				return err
			}
		}
		if !e.uses.enterFast(g) {
			if err := e.useChecked(g); err != nil {
				s.doneBy(g)
				return err
			}
		}
		return nil
	}
	if err := e.useBy(g); err != nil {
		return err
	}
	if err := s.useWithBy(e.ctx.drv, g); err != nil {
		e.doneBy(g)
		return err
	}
	return nil
}

// doneWithEvent gives back the uses useWithEvent(e, g) took. It is s.doneBy(g) and
// e.doneBy(g) written out: neither inlines, and the two calls cost 9% of the layer's time
// around a record and a wait (BenchmarkLayerRecordWait, this machine, benchstat p = 0.015).
func (s *Stream) doneWithEvent(e *Event, g uintptr) {
	if s.thread != 0 {
		runtime.UnlockOSThread()
	} else if s.owner != nil {
		s.owner.doneBy(g)
	}
	if s.uses.drop(g) {
		s.uses.settle(s)
	}
	if e.uses.drop(g) {
		e.settle()
	}
}

// Query reports whether all work submitted to the stream has completed (cuStreamQuery).
// Work still running is not an error. A capturing stream is refused with [ErrCapturing],
// before the driver, which would invalidate the capture: a borrowed stream is always asked
// (another library may capture on it), one of ours while a capture that BeginCapture began
// may be going on anywhere (else not: the question would cost a quarter of the query).
func (s *Stream) Query() (bool, error) {
	g := goroutine()
	if err := s.useBy(g); err != nil {
		return false, err
	}
	defer s.doneBy(g)
	d := s.ctx.drv
	lock := d.lockOp(uintptr(s.handle), false)
	r := s.queryHeld(lock == nil)
	d.unlockOp(lock)
	switch r {
	case driver.Success:
		return true, nil
	case driver.ErrorNotReady:
		return false, nil
	case resultCapturing:
		return false, capturingError("a query (cuStreamQuery)")
	default:
		return false, s.ctx.drv.check("cuStreamQuery", r)
	}
}

// Synchronize waits until all work submitted to the stream has completed, as
// cuStreamSynchronize, by queries (Driver.wait). From inside a host function it fails with
// [ErrInHostFunc]; on a capturing stream, whoever began the capture, with [ErrCapturing],
// before the driver, which would invalidate the capture.
func (s *Stream) Synchronize() error {
	if err := s.use(); err != nil {
		return err
	}
	defer s.done()
	if err := s.notCapturing("a synchronize (cuStreamSynchronize)"); err != nil {
		return err
	}
	d := s.ctx.drv
	r := d.wait(uintptr(s.handle), nil, s.queryHeld)
	if r == resultCapturing {
		return capturingError("a synchronize (cuStreamSynchronize)") // begun while it waited
	}
	return d.check("cuStreamSynchronize", r)
}

// queryHeld is the stream's query, made holding the capture lock (lockOp; whole: a capture
// of ours is counted). Where a capture of ours may go on, or the stream is borrowed (another
// library may capture on it), its capture is asked first, in the same step, and a capturing
// stream is answered resultCapturing, not queried: the driver refuses the query and
// invalidates the capture. Ours is asked only then, for the query is hot. Asked under a
// lock of its own, a BeginCapture between the question and the query (or a poll of
// Synchronize's) let the query reach the capturing stream
// (TestQueriesRacingCapturesNeverInvalidateThem).
func (s *Stream) queryHeld(whole bool) driver.Result {
	if whole || !s.owned {
		if status, r := s.captureStatusHeld(); r != driver.Success {
			return r
		} else if status != driver.CaptureStatusNone {
			return resultCapturing
		}
	}
	return s.api.StreamQuery(s.callCtx(), s.handle)
}

// Record records e on the stream (cuEventRecord): e completes when the work submitted so
// far has. e must be of the stream's device ([ErrWrongDevice]).
func (s *Stream) Record(e *Event) error {
	g := goroutine()
	if err := s.useWithEvent(e, g); err != nil {
		return err
	}
	defer s.doneWithEvent(e, g)
	if ed, sd := e.ctx.dev.Ordinal(), s.ctx.dev.Ordinal(); ed != sd {
		return fmt.Errorf("%w: an event of device %d recorded on a stream of device %d (record it on a stream of "+
			"device %d; a stream of any device may wait for it)", ErrWrongDevice, ed, sd, ed)
	}
	d := s.ctx.drv
	lock := d.lockOp(uintptr(s.handle), e.linked())
	r := s.api.EventRecord(s.callCtx(), e.handle, s.handle)
	if r == driver.Success {
		e.recorded(s)
	}
	d.unlockOp(lock)
	return d.check("cuEventRecord", r)
}

// WaitEvent makes work submitted to the stream from now on wait for e's last record
// (cuStreamWaitEvent). It does not block the caller.
func (s *Stream) WaitEvent(e *Event) error {
	g := goroutine()
	if err := s.useWithEvent(e, g); err != nil {
		return err
	}
	defer s.doneWithEvent(e, g)
	return s.waitOn(e)
}

// waitOn is WaitEvent's driver call, under the capture lock; the caller holds uses of s and e.
func (s *Stream) waitOn(e *Event) error {
	d := s.ctx.drv
	lock := d.lockOp(uintptr(s.handle), e.linked())
	r := s.api.StreamWaitEvent(s.callCtx(), s.handle, e.handle, 0)
	d.unlockOp(lock)
	return e.checkRecorded("cuStreamWaitEvent", r)
}

// WaitStream makes work submitted to s from now on wait for everything submitted to other
// so far: an event of other's, recorded on other and waited on by s, both in one call
// into the driver.
func (s *Stream) WaitStream(other *Stream) error {
	g := goroutine()
	if err := s.useBy(g); err != nil {
		return err
	}
	defer s.doneBy(g)
	if err := other.useWithBy(s.ctx.drv, g); err != nil {
		return err
	}
	defer other.doneBy(g)
	fence, err := other.fenceEvent(g)
	if err != nil {
		return err
	}
	defer fence.doneBy(g)
	if other.handle.IsSpecial() && other.ctx.handle != s.ctx.handle {
		// other's handle means other's context's default stream: record there first.
		if err := other.Record(fence); err != nil {
			return err
		}
		return s.waitOn(fence)
	}
	lock := s.ctx.drv.lockOp(uintptr(s.handle), fence.linked())
	defer s.ctx.drv.unlockOp(lock)
	ctx := s.callCtx()
	if other.handle.IsSpecial() {
		ctx = other.ctx.handle // the same context as s's, checked above
	}
	r, second := s.api.EventRecordAndWait(ctx, fence.handle, other.handle, s.handle)
	if second { // the record was made
		fence.recorded(other)
		return s.ctx.drv.check("cuStreamWaitEvent", r)
	}
	return s.ctx.drv.check("cuEventRecord", r)
}

// Fence is the event WaitStream records on s for other streams to wait on, made in s's
// context on first use. It belongs to s: valid until s is closed, and not to be closed by
// the caller (where it is, s makes another for its next WaitStream, and the closed one
// refuses its calls with [ErrClosed]). Bindings that record and wait without Go use it
// (see driver.API.Entry).
func (s *Stream) Fence() (*Event, error) {
	g := goroutine()
	if err := s.useBy(g); err != nil {
		return nil, err
	}
	defer s.doneBy(g)
	e, err := s.fenceEvent(g)
	if err != nil {
		return nil, err
	}
	e.doneBy(g)
	return e, nil
}

// fenceEvent is s's fence, with a use of it taken for goroutine g (given back with
// doneBy): the use and the check that it is open are one step, so a caller's Close of the
// fence cannot destroy it under the record that uses it. A fence the caller closed is
// replaced.
func (s *Stream) fenceEvent(g uintptr) (*Event, error) {
	for {
		if e := s.fence.Load(); e != nil {
			if err := e.useBy(g); err == nil || !errors.Is(err, ErrClosed) {
				return e, err
			}
			s.fence.CompareAndSwap(e, nil) // closed by a caller: make another
			continue
		}
		s.fenceMu.Lock()
		if s.fence.Load() == nil {
			e, err := s.ctx.takeFence()
			if err != nil {
				s.fenceMu.Unlock()
				return nil, err
			}
			s.fence.Store(e)
		}
		s.fenceMu.Unlock()
	}
}

// Priority is cuStreamGetPriority.
func (s *Stream) Priority() (int, error) {
	if err := s.use(); err != nil {
		return 0, err
	}
	defer s.done()
	var p int
	r := s.runLocked(func() (r driver.Result) { p, r = s.api.StreamGetPriority(s.handle); return r })
	return p, s.ctx.drv.check("cuStreamGetPriority", r)
}

// NonBlocking reports whether the stream was created with CU_STREAM_NON_BLOCKING
// (cuStreamGetFlags).
func (s *Stream) NonBlocking() (bool, error) {
	if err := s.use(); err != nil {
		return false, err
	}
	defer s.done()
	if err := s.notCapturing("reading its flags (cuStreamGetFlags)"); err != nil {
		return false, err
	}
	var f uint32
	r := s.runLocked(func() (r driver.Result) { f, r = s.api.StreamGetFlags(s.handle); return r })
	return f&driver.StreamNonBlocking != 0, s.ctx.drv.check("cuStreamGetFlags", r)
}

// ID is cuStreamGetId: unique among the process's streams for its lifetime, so a handle
// address reused after a destroy has a new ID. For the per-thread default stream it
// depends on the calling thread. A borrowed stream object's is the one read when it was
// wrapped (and checked before every use), so it is known during capture too; for the
// others the driver is asked, which refuses a capturing stream and invalidates the
// capture: such a stream is refused first, with [ErrCapturing].
func (s *Stream) ID() (uint64, error) {
	if err := s.use(); err != nil {
		return 0, err
	}
	defer s.done()
	if s.id != 0 {
		return s.id, nil
	}
	if err := s.notCapturing("asking its id (cuStreamGetId)"); err != nil {
		return 0, err
	}
	var id uint64
	r := s.runLocked(func() (r driver.Result) { id, r = s.api.StreamGetId(s.handle); return r })
	return id, s.ctx.drv.check("cuStreamGetId", r)
}

// Close destroys an owned stream (cuStreamDestroy; work already submitted still runs) or
// forgets a borrowed one. It is idempotent. A call on s in flight on another goroutine
// keeps the stream until it returns (the last one destroys it, and its error is lost);
// calls begun after Close fail with [ErrClosed].
func (s *Stream) Close() error {
	if s == nil {
		return ErrNil
	}
	if s.ctx == nil {
		return errZero("Stream")
	}
	_, err := s.uses.close(s)
	return err
}

// destroy gives back what s holds: its fence, an owned stream, its context's count. The
// last use of a closed s calls it, once (see uses).
func (s *Stream) destroy() error {
	if s.vouched {
		s.ctx.drv.vouch(s.handle, -1)
	}
	var err error
	if f := s.fence.Load(); f != nil {
		err = s.ctx.putFence(f)
	}
	if s.owned {
		s.endLostCapture()
		d := s.ctx.drv
		d.oursMu.Lock()
		delete(d.ours, s.handle)
		lock := d.lockOp(uintptr(s.handle), false)
		r := s.api.StreamDestroy(s.handle)
		d.unlockOp(lock)
		d.oursMu.Unlock()
		if e := d.check("cuStreamDestroy", r); e != nil {
			err = e
		}
	}
	s.count(false)                      // after the destroy, which discards a capture of ours going on: until then it stays counted (capturelock.go)
	if e := s.ctx.release(); e != nil { // a no-op for a borrowed context
		err = e
	}
	return err
}

// endLostCapture ends the capture BeginCapture began on an owned stream about to be
// destroyed, and destroys the graph it made, which gives back the host functions captured
// so far (the graph's user objects): the stream's destroy alone left them for the life of
// the process (seen on the GPU when that was written, 3f5b9bc). Only a capture begun here
// (its id is the one BeginCapture read): on a stream only joined to another's capture, an
// end would invalidate that capture (bench/capture_lifetimes.c, case 7). Its errors are not
// Close's: the capture is lost either way. A goroutine BeginCapture locked stays locked
// (only it can unlock itself).
func (s *Stream) endLostCapture() {
	began := s.began.Load()
	if began == 0 {
		return
	}
	d := s.ctx.drv
	d.lockChange()
	defer d.unlockChange()
	status, id, r := s.api.StreamGetCaptureInfo(s.ctx.handle, s.handle)
	if r != driver.Success || status == driver.CaptureStatusNone || id != began {
		return
	}
	if g, r := s.api.StreamEndCapture(s.handle); r == driver.Success {
		s.api.GraphDestroy(g)
	}
}

// notCapturing is ErrCapturing where s captures: what (a query, a synchronize, its flags or
// id) the driver refuses on a capturing stream, invalidating the capture.
func (s *Stream) notCapturing(what string) error {
	if capturing, err := s.capturingNow(); err != nil || !capturing {
		return err
	}
	return capturingError(what)
}

// capturingError is what refuses a call on a capturing stream before the driver.
func capturingError(what string) error {
	return fmt.Errorf("streambridge: %s on a capturing stream: %w (the driver would invalidate the capture)", what, ErrCapturing)
}

// capturingNow asks the driver whether s is capturing (active or invalidated), and
// counts a capture of ours that ended elsewhere. The caller holds a use of s.
func (s *Stream) capturingNow() (bool, error) {
	lock := s.ctx.drv.lockOp(uintptr(s.handle), false)
	status, r := s.captureStatusHeld()
	s.ctx.drv.unlockOp(lock)
	if err := s.ctx.drv.check("cuStreamGetCaptureInfo", r); err != nil {
		return false, err
	}
	return status != driver.CaptureStatusNone, nil
}

// captureStatusHeld is s's capture status (cuStreamGetCaptureInfo), asked holding the
// capture lock (lockOp), with a capture of ours that ended elsewhere counted out.
func (s *Stream) captureStatusHeld() (driver.CaptureStatus, driver.Result) {
	status, _, r := s.api.StreamGetCaptureInfo(s.callCtx(), s.handle)
	if r == driver.Success && status == driver.CaptureStatusNone {
		s.count(false) // ended elsewhere; under the lock, no BeginCapture can count one meanwhile
	}
	return status, r
}

// count records whether a capture BeginCapture began on s may be going on.
func (s *Stream) count(capturing bool) {
	if (s.counted.Load() != 0) == capturing {
		return
	}
	d := s.ctx.drv
	d.countingMu.Lock()
	defer d.countingMu.Unlock()
	switch serial := s.counted.Load(); {
	case capturing && serial == 0:
		d.serials++
		s.counted.Store(d.serials)
		d.counting[d.serials] = s
		d.capturing.Add(1)
		d.gate.Closed.Add(1) // the C core's calls take the lock whole while a capture is counted
	case !capturing && serial != 0:
		s.counted.Store(0)
		delete(d.counting, serial)
		d.capturing.Add(-1)
		d.gate.Closed.Add(-1)
	}
}

// countedStream is the stream whose capture has the serial (Stream.counted), while it is
// counted; nil once not.
func (d *Driver) countedStream(serial uint64) *Stream {
	d.countingMu.Lock()
	defer d.countingMu.Unlock()
	return d.counting[serial]
}
