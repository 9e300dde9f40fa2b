package sim

// User objects (cuUserObjectCreate): a destructor the driver calls once the last reference
// to the object is released. References are held by whoever created it, by graphs
// (cuGraphRetainUserObject, during capture too) and by every executable graph instantiated
// from such a graph, which gives its references back only once its launches in flight have
// run. As in CUDA, the destructor runs on a thread of the driver's, never inside the call
// that released the last reference, and is given the pointer it was created with.

import (
	"runtime"
	"sync"

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

// releaseUserObject drops n references to o; the last queues its destructor, which runs on
// the driver's destructor thread, one at a time, as the real driver's do (a goroutine locked
// to a thread for each took a thread each: a graph of thousands of captured host functions
// destroyed at once took the process past Go's 10,000 threads). Caller holds d.mu.
func (d *Driver) releaseUserObject(o *userObject, n int) {
	if o.refs -= n; o.refs > 0 {
		return
	}
	d.forget(o.handle)
	d.destructors.push(func() {
		if o.destroy == 0 {
			driver.RunHostFunc(o.key)
			return
		}
		purego.SyscallN(o.destroy, o.ptr)
	})
}

// destructorQueue is the destructors waiting to run, and the one goroutine that runs them,
// started with the first, locked to its thread while it runs one.
type destructorQueue struct {
	mu      sync.Mutex
	pending []func()
	running bool
}

// push queues f; it never waits, so it may be called with d.mu held.
func (q *destructorQueue) push(f func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pending = append(q.pending, f)
	if !q.running {
		q.running = true
		go q.run()
	}
}

// run runs what is queued, then ends: the next push starts another.
func (q *destructorQueue) run() {
	runtime.LockOSThread() // one thread for each call, as the driver's own
	defer runtime.UnlockOSThread()
	for {
		q.mu.Lock()
		if len(q.pending) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		f := q.pending[0]
		q.pending = q.pending[1:]
		q.mu.Unlock()
		f()
	}
}

// releaseAll gives back every reference in refs. Caller holds d.mu.
func (d *Driver) releaseAll(refs owned) {
	for o, n := range refs {
		d.releaseUserObject(o, n)
	}
}
