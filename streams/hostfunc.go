package streams

import (
	"errors"

	"github.com/streambridge/streambridge/internal/driver"
)

// LaunchHostFunc enqueues fn to run on a driver thread once the stream reaches this point
// (cuLaunchHostFunc); work submitted after it waits until fn returns. fn must not call
// CUDA. A panic in fn is recovered and reported to the handler of
// [SetHostFuncPanicHandler]; the stream carries on.
//
// All host functions share one C entry point and find their Go function in a table, so
// there is no limit on how many run over a process's life. During stream capture (whoever
// began it: this package, or another library on the same handle) fn becomes a graph node
// that runs at every launch of the graph, and the graph keeps it: it holds a CUDA user
// object whose destructor frees fn, which the driver calls once the graph and every
// executable graph made from it are destroyed and their launches have run, as the Python
// package's C core keeps a captured callback. A stream whose capture was invalidated is
// refused first ([ErrCaptureInvalidated]): that capture can only fail.
func (s *Stream) LaunchHostFunc(fn func()) error {
	if err := s.use(); err != nil {
		return err
	}
	defer s.done()
	if fn == nil {
		return errors.New("streambridge: LaunchHostFunc: nil function")
	}
	d := s.ctx.drv
	lock := d.lockOp(uintptr(s.handle), false) // no capture of ours begins or ends between the question and the launch, nor does s join one
	defer d.unlockOp(lock)
	status, graph, err := s.captureGraph()
	if err != nil {
		return err
	}
	switch status {
	case driver.CaptureStatusInvalidated:
		return &CallError{Call: "cuLaunchHostFunc", Result: driver.ErrorCaptureInvalidated,
			Hint: "the stream's capture was invalidated; end it (EndCapture fails) before launching more work on it"}
	case driver.CaptureStatusActive:
		key := driver.RegisterHostFunc(fn, true)
		if err := d.keep(graph, func() { driver.ReleaseHostFunc(key) }); err != nil {
			return err
		}
		return d.check("cuLaunchHostFunc", s.api.LaunchHostFunc(s.callCtx(), s.handle, key)) // on failure the graph frees key
	}
	key := driver.RegisterHostFunc(fn, false)
	if err := d.check("cuLaunchHostFunc", s.api.LaunchHostFunc(s.callCtx(), s.handle, key)); err != nil {
		driver.ReleaseHostFunc(key)
		return err
	}
	return nil
}

// keep makes graph, which a capture captures into, keep something until the graph and
// every executable graph made from it are destroyed and their launches have run: a user
// object of graph's (cuUserObjectCreate, cuGraphRetainUserObject) whose destructor calls
// release, on a driver thread (no CUDA call there). Where it fails, release is called.
func (d *Driver) keep(graph driver.Graph, release func()) error {
	free := driver.RegisterHostFunc(release, false)
	obj, r := d.api.HostFuncUserObject(free)
	if err := d.check("cuUserObjectCreate", r); err != nil {
		driver.ReleaseHostFunc(free)
		release()
		return err
	}
	if err := d.check("cuGraphRetainUserObject", d.api.GraphRetainUserObject(graph, obj, 1, driver.GraphUserObjectMove)); err != nil {
		d.api.UserObjectRelease(obj, 1) // its destructor releases
		return err
	}
	return nil
}

// captureGraph is s's capture status and, while a capture is active (whoever began it), the
// graph it adds to (cuStreamGetCaptureInfo). The caller holds the capture lock, so that no
// capture of ours begins or ends between the answer and the work it enqueues on s.
func (s *Stream) captureGraph() (driver.CaptureStatus, driver.Graph, error) {
	status, graph, r := s.api.StreamCaptureGraph(s.callCtx(), s.handle)
	return status, graph, s.ctx.drv.check("cuStreamGetCaptureInfo", r)
}

// keepWhileCapturing makes the graph s's capture adds to, where one is active, keep o
// (keepUse), for the work naming o the caller enqueues next on s under the capture lock: an
// async copy's buffer, a launch's module.
func (s *Stream) keepWhileCapturing(u *uses, o destroyer) error {
	status, graph, err := s.captureGraph()
	if err != nil || status != driver.CaptureStatusActive {
		return err
	}
	return s.ctx.drv.keepUse(graph, u, o)
}

// keepUse makes graph keep o, whose uses u counts: a use held (uses.hold) until the graph
// and its executables are gone (keep), so that o's Close meanwhile destroys it only then.
// The one path of a captured copy's buffer and a captured launch's module: a graph whose
// node names freed memory or an unloaded module's function crashed the real driver in its
// instantiation (SIGSEGV in cuGraphInstantiateWithFlags, H200, driver 580).
func (d *Driver) keepUse(graph driver.Graph, u *uses, o destroyer) error {
	if err := u.hold(o); err != nil {
		return err
	}
	return d.keep(graph, func() { go u.release(o) }) // a destroy is a CUDA call: not on the driver's thread
}

// LiveHostFuncs counts the host functions registered and not yet run or released; a
// steady value over many launches shows the table does not grow.
func LiveHostFuncs() int { return driver.LiveHostFuncs() }
