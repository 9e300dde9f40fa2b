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
// there is no limit on how many run over a process's life. During stream capture fn
// becomes a graph node that runs at every launch of the graph; it is kept until the
// [Graph] and all its [GraphExec]s are closed. When another library ends a capture that
// this stream's host functions joined, they cannot be known to be unused and stay
// registered for the life of the process.
func (s *Stream) LaunchHostFunc(fn func()) error {
	if err := s.use(); err != nil {
		return err
	}
	defer s.done()
	if fn == nil {
		return errors.New("streambridge: LaunchHostFunc: nil function")
	}
	d := s.ctx.drv
	lock := d.lockOp(uintptr(s.handle), nil) // no capture of ours begins or ends between the question and the launch, nor does s join one
	defer d.unlockOp(lock)
	status, captureID, r := s.api.StreamGetCaptureInfo(s.callCtx(), s.handle)
	if err := s.ctx.drv.check("cuStreamGetCaptureInfo", r); err != nil {
		return err
	}
	if status == driver.CaptureStatusInvalidated {
		// the capture will end in an error, and its id is not to be had: the host function
		// would be kept for no graph (seen on an H100, the chaos soak)
		return &CallError{Call: "cuLaunchHostFunc", Result: driver.ErrorCaptureInvalidated,
			Hint: "the stream's capture was invalidated; end it (EndCapture fails) before launching more work on it"}
	}
	capturing := status != driver.CaptureStatusNone
	key := driver.RegisterHostFunc(fn, capturing)
	r = s.api.LaunchHostFunc(s.callCtx(), s.handle, key)
	if err := s.ctx.drv.check("cuLaunchHostFunc", r); err != nil {
		driver.ReleaseHostFunc(key)
		return err
	}
	if capturing {
		d.mu.Lock()
		d.captures[captureID] = append(d.captures[captureID], key)
		d.mu.Unlock()
	}
	return nil
}

// LiveHostFuncs counts the host functions registered and not yet run or released; a
// steady value over many launches shows the table does not grow.
func LiveHostFuncs() int { return driver.LiveHostFuncs() }
