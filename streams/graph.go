package streams

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"syscall"

	"github.com/streambridge/streambridge/internal/driver"
)

// CaptureMode is CUstreamCaptureMode: which calls from other threads a capture forbids.
type CaptureMode = driver.CaptureMode

// Capture modes.
const (
	CaptureGlobal      = driver.CaptureModeGlobal
	CaptureThreadLocal = driver.CaptureModeThreadLocal
	CaptureRelaxed     = driver.CaptureModeRelaxed
)

// CaptureStatus is CUstreamCaptureStatus.
type CaptureStatus = driver.CaptureStatus

// Capture statuses.
const (
	CaptureNone        = driver.CaptureStatusNone
	CaptureActive      = driver.CaptureStatusActive
	CaptureInvalidated = driver.CaptureStatusInvalidated
)

// BeginCapture starts capturing the work submitted to the stream into a graph instead of
// running it (cuStreamBeginCapture). Any stream can be captured, including one another
// library created, except the legacy default stream.
//
// CUDA wants a capture in global or thread-local mode ended on the OS thread that began
// it, and a goroutine moves between threads: in those modes BeginCapture locks the calling
// goroutine to its thread (runtime.LockOSThread) until [Stream.EndCapture], which must be
// called from the same goroutine (from another, it fails with [ErrCaptureWrongThread] and
// the capture goes on). A relaxed capture may be ended from anywhere and locks nothing.
func (s *Stream) BeginCapture(mode CaptureMode) error {
	if err := s.use(); err != nil {
		return err
	}
	defer s.done()
	runtime.LockOSThread()
	s.ctx.drv.lockChange() // no call in flight until it is counted: every call after the begin finds it counted (capturelock.go)
	r := s.run(func() driver.Result { return s.api.StreamBeginCapture(s.handle, mode) })
	if r == driver.Success {
		s.count(true)
		if _, id, r := s.api.StreamGetCaptureInfo(s.ctx.handle, s.handle); r == driver.Success {
			s.began.Store(id)
		}
	}
	s.ctx.drv.unlockChange()
	if r != driver.Success || mode == CaptureRelaxed {
		runtime.UnlockOSThread()
	} else {
		s.capturer.Store(int32(syscall.Gettid())) // the lock stays until EndCapture
	}
	return s.ctx.drv.check("cuStreamBeginCapture", r)
}

// EndCapture ends the capture begun on this stream and returns the graph
// (cuStreamEndCapture), and unlocks the goroutine BeginCapture locked. A capture that an
// illegal operation invalidated fails with [ErrCaptureInvalidated]. One begun by
// BeginCapture (global or thread-local) and ended from another thread fails with
// [ErrCaptureWrongThread] before the driver sees it, and goes on; one that other code began
// on another thread the driver ends, discarding it, with the same error.
func (s *Stream) EndCapture() (*Graph, error) {
	if err := s.use(); err != nil {
		return nil, err
	}
	defer s.done()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := int32(syscall.Gettid())
	if began := s.capturer.Load(); began != 0 && began != tid {
		// the driver would end the capture, discarding it, and say so only afterwards
		return nil, &CallError{Call: "cuStreamEndCapture", Result: driver.ErrorCaptureWrongThread,
			Hint: fmt.Sprintf("the capture was begun on OS thread %d, and this is %d; call EndCapture from the goroutine that called BeginCapture, "+
				"which stays locked to that thread until then; the capture goes on", began, tid)}
	}
	var g driver.Graph
	d := s.ctx.drv
	d.lockChange()
	r := s.run(func() (r driver.Result) { g, r = s.api.StreamEndCapture(s.handle); return r })
	if r != driver.ErrorCaptureUnmatched { // the driver ended it, or discarded it (else s is only joined to it): uncounted before another BeginCapture can count one
		s.count(false)
		s.began.Store(0)
	}
	d.unlockChange()
	if s.capturer.CompareAndSwap(tid, 0) {
		runtime.UnlockOSThread() // BeginCapture's
	}
	if err := d.check("cuStreamEndCapture", r); err != nil {
		return nil, err // a failed capture's graph is destroyed, and with it the host functions it kept
	}
	graph := &Graph{ctx: s.ctx, api: s.api, handle: g}
	graph.refs.Store(1)
	s.ctx.hold() // until the graph and its executables are closed
	return graph, nil
}

// CaptureInfo is cuStreamGetCaptureInfo: the capture status and, while capturing, the
// capture's unique id.
func (s *Stream) CaptureInfo() (CaptureStatus, uint64, error) {
	if err := s.use(); err != nil {
		return 0, 0, err
	}
	defer s.done()
	lock := s.ctx.drv.lockOp(uintptr(s.handle), false)
	st, id, r := s.api.StreamGetCaptureInfo(s.ctx.handle, s.handle)
	s.ctx.drv.unlockOp(lock)
	return st, id, s.ctx.drv.check("cuStreamGetCaptureInfo", r)
}

// IsCapturing is cuStreamIsCapturing: true while a capture is active or invalidated but
// not yet ended.
func (s *Stream) IsCapturing() (bool, error) {
	if err := s.use(); err != nil {
		return false, err
	}
	defer s.done()
	var st CaptureStatus
	r := s.runLocked(func() (r driver.Result) { st, r = s.api.StreamIsCapturing(s.handle); return r })
	return st != CaptureNone, s.ctx.drv.check("cuStreamIsCapturing", r)
}

// Graph is a CUDA graph made by stream capture. Close destroys it (cuGraphDestroy);
// executable graphs instantiated from it stay valid until their own Close.
type Graph struct {
	ctx    *Context
	api    driver.API
	handle driver.Graph
	uses   uses         // open, and the calls in flight: Close's destroy waits for the last (uses.go)
	refs   atomic.Int32 // the graph and its live execs: the context is released at 0
}

// Handle is the CUgraph.
func (g *Graph) Handle() uintptr {
	if g == nil {
		return 0
	}
	return uintptr(g.handle)
}

// NodeCount is the number of nodes in the graph (cuGraphGetNodes).
func (g *Graph) NodeCount() (int, error) {
	if err := g.use(); err != nil {
		return 0, err
	}
	defer g.done()
	lock := g.ctx.drv.lockWhole()
	n, r := g.api.GraphGetNodes(g.handle)
	g.ctx.drv.unlockOp(lock)
	return n, g.ctx.drv.check("cuGraphGetNodes", r)
}

// Instantiate makes an executable graph (cuGraphInstantiateWithFlags).
func (g *Graph) Instantiate() (*GraphExec, error) {
	if err := g.use(); err != nil {
		return nil, err
	}
	defer g.done()
	var e driver.GraphExec
	lock := g.ctx.drv.lockWhole()
	r := g.ctx.do(func() (r driver.Result) {
		e, r = g.api.GraphInstantiateWithFlags(g.handle, 0)
		return r
	})
	g.ctx.drv.unlockOp(lock)
	if err := g.ctx.drv.check("cuGraphInstantiateWithFlags", r); err != nil {
		return nil, err
	}
	g.refs.Add(1)
	return &GraphExec{graph: g, handle: e}, nil
}

func (g *Graph) unref() {
	if g.refs.Add(-1) == 0 {
		go g.ctx.release() // this may run in a host function, where no CUDA call is allowed
	}
}

// use takes a use of g for one call (see uses); done gives it back.
func (g *Graph) use() error {
	if g == nil {
		return ErrNil
	}
	if g.ctx == nil {
		return errZero("Graph")
	}
	if err := g.uses.enter(g, goroutine()); err != nil {
		return err
	}
	return nil
}

func (g *Graph) done() { g.uses.leave(g, goroutine()) }

// Close destroys the graph (cuGraphDestroy). It is idempotent; a call in flight on another
// goroutine keeps the graph until it returns.
func (g *Graph) Close() error {
	if g == nil {
		return ErrNil
	}
	if g.ctx == nil {
		return errZero("Graph")
	}
	_, err := g.uses.close(g)
	return err
}

func (g *Graph) destroy() error {
	lock := g.ctx.drv.lockWhole()
	r := g.api.GraphDestroy(g.handle)
	g.ctx.drv.unlockOp(lock)
	err := g.ctx.drv.check("cuGraphDestroy", r)
	g.unref()
	return err
}

// GraphExec is an executable graph. Close destroys it (cuGraphExecDestroy).
type GraphExec struct {
	graph  *Graph
	handle driver.GraphExec
	uses   uses // open, and the calls in flight: Close's destroy waits for the last (uses.go)
}

// Handle is the CUgraphExec.
func (e *GraphExec) Handle() uintptr {
	if e == nil {
		return 0
	}
	return uintptr(e.handle)
}

// use takes a use of e and of s, for a call of e's on s (see uses): both open, of one
// driver. done gives both back.
func (e *GraphExec) use(s *Stream) error {
	if e == nil {
		return ErrNil
	}
	if e.graph == nil {
		return errZero("GraphExec")
	}
	if err := e.uses.enter(e, goroutine()); err != nil {
		return err
	}
	if err := s.useWith(e.graph.ctx.drv); err != nil {
		e.uses.leave(e, goroutine())
		return err
	}
	return nil
}

func (e *GraphExec) done(s *Stream) {
	s.done()
	e.uses.leave(e, goroutine())
}

// Launch runs the graph on s (cuGraphLaunch). A stream that is capturing is refused with
// [ErrCapturing] before the driver, which refuses a graph launched into a capture and
// invalidates the capture. The graph's host functions stay until the launch has run,
// however soon the executable, the graph or s is closed (the driver holds the user objects
// that keep them: see [Stream.LaunchHostFunc]); closing a stream does not cancel its work.
func (e *GraphExec) Launch(s *Stream) error {
	if err := e.use(s); err != nil {
		return err
	}
	defer e.done(s)
	d := s.ctx.drv
	lock := d.lockLaunch(uintptr(s.handle)) // no other call on s meanwhile (a synchronize's queries too); no capture begins between the question and the launch, nor does s join one
	defer d.unlockLaunch(lock)
	status, _, r := s.api.StreamGetCaptureInfo(s.callCtx(), s.handle)
	if err := d.check("cuStreamGetCaptureInfo", r); err != nil {
		return err
	}
	if status != driver.CaptureStatusNone {
		return fmt.Errorf("streambridge: launch of a graph on a capturing stream: %w (the driver refuses it and would invalidate the capture; launch it after EndCapture)", ErrCapturing)
	}
	return d.check("cuGraphLaunch", s.run(func() driver.Result { return s.api.GraphLaunch(e.handle, s.handle) }))
}

// Upload prepares the graph's device resources on s ahead of its first launch
// (cuGraphUpload).
func (e *GraphExec) Upload(s *Stream) error {
	if err := e.use(s); err != nil {
		return err
	}
	defer e.done(s)
	d := s.ctx.drv
	lock := d.lockLaunch(uintptr(s.handle))
	defer d.unlockLaunch(lock)
	return d.check("cuGraphUpload", s.run(func() driver.Result { return s.api.GraphUpload(e.handle, s.handle) }))
}

// Close destroys the executable graph (cuGraphExecDestroy); launches in flight still
// run. It is idempotent; a Launch in flight on another goroutine keeps the executable
// until it returns.
func (e *GraphExec) Close() error {
	if e == nil {
		return ErrNil
	}
	if e.graph == nil {
		return errZero("GraphExec")
	}
	_, err := e.uses.close(e)
	return err
}

// destroy destroys the executable once no call holds it; the graph's host functions stay
// while its launches do (see Launch).
func (e *GraphExec) destroy() error {
	d := e.graph.ctx.drv
	lock := d.lockWhole()
	r := e.graph.api.GraphExecDestroy(e.handle)
	d.unlockOp(lock)
	err := d.check("cuGraphExecDestroy", r)
	e.graph.unref()
	return err
}
