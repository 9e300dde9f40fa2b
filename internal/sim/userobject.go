package sim

// User objects (cuUserObjectCreate): a destructor the driver calls once the last reference
// to the object is released. References are held by whoever created it, by graphs
// (cuGraphRetainUserObject, during capture too) and by every executable graph instantiated
// from such a graph, which gives its references back only once its launches in flight have
// run. As in CUDA, the destructor runs on a thread of the driver's, never inside the call
// that released the last reference, and is given the pointer it was created with.

import (
	"runtime"

	"github.com/ebitengine/purego"

	"github.com/streambridge/streambridge/internal/driver"
)

// The one flag cuUserObjectCreate takes (CU_USER_OBJECT_NO_DESTRUCTOR_SYNC, required), and
// cuGraphRetainUserObject's (CU_GRAPH_USER_OBJECT_MOVE: the caller's references move).
const (
	userObjectNoDestructorSync = 1
	graphUserObjectMove        = 1
)

type userObject struct {
	handle       uintptr
	ptr, destroy uintptr // destroy(ptr), a C function
	key          uintptr // or, where destroy is 0, driver.RunHostFunc(key): HostFuncUserObject's
	refs         int
}

// owned is the references a graph or an executable graph holds, by object.
type owned map[*userObject]int

func (d *Driver) UserObjectCreate(ptr, destroy uintptr, refs int, flags uint32) (uintptr, driver.Result) {
	if destroy == 0 || refs < 1 || flags != userObjectNoDestructorSync {
		return 0, driver.ErrorInvalidValue
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	o := &userObject{ptr: ptr, destroy: destroy, refs: refs}
	o.handle = d.newHandle(o)
	return o.handle, driver.Success
}

func (d *Driver) HostFuncUserObject(key uintptr) (uintptr, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	o := &userObject{key: key, refs: 1}
	o.handle = d.newHandle(o)
	return o.handle, driver.Success
}

func (d *Driver) UserObjectRelease(h uintptr, count int) driver.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	o, ok := lookup[*userObject](d, h)
	if !ok || count < 1 || count > o.refs {
		return driver.ErrorInvalidValue
	}
	d.releaseUserObject(o, count)
	return driver.Success
}

func (d *Driver) GraphRetainUserObject(gh driver.Graph, h uintptr, count int, flags uint32) driver.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	g := live[*graph](d, uintptr(gh))
	o, ok := lookup[*userObject](d, h)
	if !ok || count < 1 || flags > graphUserObjectMove || (flags == graphUserObjectMove && count > o.refs) {
		return driver.ErrorInvalidValue
	}
	if flags != graphUserObjectMove {
		o.refs += count
	}
	g.owns[o] += count
	return driver.Success
}

// releaseUserObject drops n references to o; the last calls its destructor on a thread of
// its own. Caller holds d.mu.
func (d *Driver) releaseUserObject(o *userObject, n int) {
	if o.refs -= n; o.refs > 0 {
		return
	}
	d.forget(o.handle)
	go func() {
		runtime.LockOSThread() // one thread for the whole call, as the driver's own
		defer runtime.UnlockOSThread()
		if o.destroy == 0 {
			driver.RunHostFunc(o.key)
			return
		}
		purego.SyscallN(o.destroy, o.ptr)
	}()
}

// releaseAll gives back every reference in refs. Caller holds d.mu.
func (d *Driver) releaseAll(refs owned) {
	for o, n := range refs {
		d.releaseUserObject(o, n)
	}
}
