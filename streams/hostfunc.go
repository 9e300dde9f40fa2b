package streams

import (
	"errors"
	"sync"

	"github.com/ebitengine/purego"

	"github.com/streambridge/streambridge/internal/driver"
)

// LaunchHostFunc enqueues fn to run on a driver thread once the stream reaches this point
// (cuLaunchHostFunc); work submitted after it waits until fn returns. fn must not call
// CUDA. A panic in fn is recovered and reported to the handler of
// [SetHostFuncPanicHandler]; the stream carries on.
//
// All host functions share one C entry point and find their Go function in a table, so
// there is no limit on how many run over a process's life. During stream capture,
// whichever library began it, fn becomes a graph node that runs at every launch of the
// graph. The graph owns it: it is kept until that graph, and every executable graph made
// from it, is destroyed and their launches have run (a CUDA user object the graph holds
// frees it), as Python's captured callbacks are.
func (s *Stream) LaunchHostFunc(fn func()) error {
	if err := s.live(); err != nil {
		return err
	}
	if fn == nil {
		return errors.New("streambridge: LaunchHostFunc: nil function")
	}
	status, _, r := s.api.StreamGetCaptureInfo(s.callCtx(), s.handle)
	if err := s.ctx.drv.check("cuStreamGetCaptureInfo", r); err != nil {
		return err
	}
	captured := status == driver.CaptureStatusActive
	key := driver.RegisterHostFunc(fn, captured)
	if captured {
		if err := s.giveToCapturedGraph(key); err != nil {
			return err
		}
	}
	r = s.api.LaunchHostFunc(s.callCtx(), s.handle, key)
	if err := s.ctx.drv.check("cuLaunchHostFunc", r); err != nil {
		if !captured { // a captured one is the graph's to free
			driver.ReleaseHostFunc(key)
		}
		return err
	}
	return nil
}

// giveToCapturedGraph makes the graph s is capturing the owner of host function key: a
// user object the graph holds releases key once nothing can run it. On an error key is
// freed, now or by the user object.
func (s *Stream) giveToCapturedGraph(key uintptr) error {
	ctx, d := s.callCtx(), s.ctx.drv
	g, r := s.api.StreamGetCaptureGraph(ctx, s.handle)
	if r == driver.Success && g == 0 {
		r = driver.ErrorCaptureInvalidated // it ended, or was invalidated, since asked
	}
	if err := d.check("cuStreamGetCaptureInfo", r); err != nil {
		driver.ReleaseHostFunc(key)
		return err
	}
	o, r := s.api.UserObjectCreate(key, releaseHostFuncEntry())
	if err := d.check("cuUserObjectCreate", r); err != nil {
		driver.ReleaseHostFunc(key)
		return err
	}
	if r := s.api.GraphRetainUserObject(g, o, 1, true); r != driver.Success {
		s.api.UserObjectRelease(o, 1) // its destructor frees key
		return d.check("cuGraphRetainUserObject", r)
	}
	return nil
}

// releaseHostFuncEntry is the C function a captured host function's user object is
// destroyed with: it frees the function's key (one purego callback for the process).
var releaseHostFuncEntry = sync.OnceValue(func() uintptr {
	return purego.NewCallback(func(key uintptr) uintptr { driver.ReleaseHostFunc(key); return 0 })
})

// LiveHostFuncs counts the host functions registered and not yet run or released; a
// steady value over many launches shows the table does not grow.
func LiveHostFuncs() int { return driver.LiveHostFuncs() }
