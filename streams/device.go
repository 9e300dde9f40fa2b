package streams

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/streambridge/streambridge/internal/driver"
)

// Device is a CUDA device. It holds no driver resources.
type Device struct {
	drv *Driver
	dev driver.Device
}

// Ordinal is the device's index, as CUDA_VISIBLE_DEVICES numbers it.
func (d *Device) Ordinal() int {
	if d == nil {
		return -1
	}
	return int(d.dev)
}

// Driver is the driver the device belongs to.
func (d *Device) Driver() *Driver {
	if d == nil {
		return nil
	}
	return d.drv
}

// valid is ErrNil for a nil or zero Device: the first check of each of its methods that
// reaches the driver.
func (d *Device) valid() error {
	switch {
	case d == nil:
		return ErrNil
	case d.drv == nil:
		return errZero("Device")
	}
	return nil
}

// Name is cuDeviceGetName.
func (d *Device) Name() (string, error) {
	if err := d.valid(); err != nil {
		return "", err
	}
	if err := outsideHostFunc(); err != nil {
		return "", err
	}
	s, r := d.drv.api.DeviceGetName(d.dev)
	return s, d.drv.check("cuDeviceGetName", r)
}

// ComputeCapability reads CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR and _MINOR.
func (d *Device) ComputeCapability() (major, minor int, err error) {
	if err := d.valid(); err != nil {
		return 0, 0, err
	}
	if err := outsideHostFunc(); err != nil {
		return 0, 0, err
	}
	major, r := d.drv.api.DeviceGetAttribute(driver.AttrComputeCapabilityMajor, d.dev)
	if err := d.drv.check("cuDeviceGetAttribute", r); err != nil {
		return 0, 0, err
	}
	minor, r = d.drv.api.DeviceGetAttribute(driver.AttrComputeCapabilityMinor, d.dev)
	return major, minor, d.drv.check("cuDeviceGetAttribute", r)
}

// PCIBusID is cuDeviceGetPCIBusId, such as "0000:18:00.0".
func (d *Device) PCIBusID() (string, error) {
	if err := d.valid(); err != nil {
		return "", err
	}
	if err := outsideHostFunc(); err != nil {
		return "", err
	}
	s, r := d.drv.api.DeviceGetPCIBusId(d.dev)
	return s, d.drv.check("cuDeviceGetPCIBusId", r)
}

// UUID is cuDeviceGetUuid, formatted as nvidia-smi prints it: "GPU-xxxxxxxx-xxxx-...".
func (d *Device) UUID() (string, error) {
	if err := d.valid(); err != nil {
		return "", err
	}
	if err := outsideHostFunc(); err != nil {
		return "", err
	}
	u, r := d.drv.api.DeviceGetUuid(d.dev)
	if err := d.drv.check("cuDeviceGetUuid", r); err != nil {
		return "", err
	}
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]), nil
}

// PrimaryContext retains the device's primary context (cuDevicePrimaryCtxRetain), the one
// the CUDA runtime and so PyTorch, CuPy and cuda.core use. Close releases the retain.
func (d *Device) PrimaryContext() (*Context, error) {
	if err := d.valid(); err != nil {
		return nil, err
	}
	if err := outsideHostFunc(); err != nil {
		return nil, err
	}
	h, r := d.drv.api.DevicePrimaryCtxRetain(d.dev)
	if err := d.drv.check("cuDevicePrimaryCtxRetain", r); err != nil {
		return nil, err
	}
	c := &Context{drv: d.drv, api: d.drv.api, handle: h, dev: d, primary: true}
	c.refs.Store(1)
	return c, nil
}

// Context is a CUDA context. One made by [Device.PrimaryContext] holds a retain of the
// primary context, released once it is closed and every stream, event, buffer, module and
// graph made in it is closed too: releasing the last retain resets the context, which
// would destroy them under their owners (and a later destroy of a dead handle crashes the
// driver). One met through a wrapped stream is borrowed and its Close does nothing.
type Context struct {
	drv     *Driver
	api     driver.API
	handle  driver.Context
	dev     *Device
	primary bool
	closed  atomic.Bool
	refs    atomic.Int64 // 1 until Close, plus one per live object made in the context

	fenceMu sync.Mutex
	fences  []*Event // idle fence events of closed streams (see Stream.WaitStream)
}

// maxIdleFences bounds the fence events a context keeps for reuse.
const maxIdleFences = 16

// takeFence returns an idle fence event of c's, or a new one.
func (c *Context) takeFence() (*Event, error) {
	c.fenceMu.Lock()
	if n := len(c.fences); n > 0 {
		e := c.fences[n-1]
		c.fences = c.fences[:n-1]
		c.fenceMu.Unlock()
		return e, nil
	}
	c.fenceMu.Unlock()
	d := c.drv
	d.fenceMade.Lock()
	defer d.fenceMade.Unlock()
	e, err := c.NewEvent(EventOptions{DisableTiming: true})
	if err == nil {
		d.fenceCount.Add(1)
		d.fences.Store(uintptr(e.handle), struct{}{})
	}
	return e, err
}

// IsFence reports whether handle is a fence event this package made and has not destroyed
// (Stream.Fence, what WaitStream records): an event of its own that no caller made, which
// the Python package refuses to wrap by handle (a stale handle whose address a fence took
// since: the fence's stream may destroy it under the wrapper's calls). False for a nil d.
func (d *Driver) IsFence(handle uintptr) bool {
	if d == nil {
		return false
	}
	_, ok := d.fences.Load(handle)
	return ok
}

// putFence keeps a closed stream's fence for the next stream that needs one: Python wraps a
// framework's stream afresh for each as_stream(...).wait_stream(...), and reuse saves an
// event create and destroy per wrapper. Re-recording a fence does not change the waits
// already made on it.
//
// Only a context this package retains keeps idle fences: its retain is what stops a reset
// (the last release of a primary context destroys every event in it), and Close drains the
// pool before releasing it. A borrowed context is retained by someone else, who may
// release it at any time; an event pooled there could be handed out destroyed.
func (c *Context) putFence(e *Event) error {
	if e.uses.closed() { // closed by a caller of Stream.Fence: its destroy was its Close's
		return nil
	}
	c.fenceMu.Lock()
	if !c.primary || c.closed.Load() || len(c.fences) >= maxIdleFences {
		c.fenceMu.Unlock()
		return e.Close()
	}
	c.fences = append(c.fences, e)
	c.fenceMu.Unlock()
	return nil
}

// acquire counts a new object made in c; ErrClosed once c is closed, ErrInHostFunc
// inside a host function (where CUDA forbids CUDA calls).
func (c *Context) acquire() error {
	if err := c.valid(); err != nil {
		return err
	}
	if err := outsideHostFunc(); err != nil {
		return err
	}
	if !c.primary {
		return nil
	}
	for {
		n := c.refs.Load()
		if n == 0 || c.closed.Load() {
			return ErrClosed
		}
		if c.refs.CompareAndSwap(n, n+1) {
			return nil
		}
	}
}

// hold counts an object made from a live object of c's, whose own count keeps c's above
// zero.
func (c *Context) hold() {
	if c.primary {
		c.refs.Add(1)
	}
}

// release drops a count taken by PrimaryContext or acquire; the last releases the retain.
func (c *Context) release() error {
	if !c.primary || c.refs.Add(-1) != 0 {
		return nil
	}
	return c.drv.check("cuDevicePrimaryCtxRelease", c.api.DevicePrimaryCtxRelease(c.dev.dev))
}

// Handle is the CUcontext.
func (c *Context) Handle() uintptr {
	if c == nil {
		return 0
	}
	return uintptr(c.handle)
}

// Device is the context's device.
func (c *Context) Device() *Device {
	if c == nil {
		return nil
	}
	return c.dev
}

// Driver is the driver the context belongs to.
func (c *Context) Driver() *Driver {
	if c == nil {
		return nil
	}
	return c.drv
}

// valid is ErrNil for a nil or zero Context: the first check of each of its methods that
// reaches the driver.
func (c *Context) valid() error {
	switch {
	case c == nil:
		return ErrNil
	case c.drv == nil:
		return errZero("Context")
	}
	return nil
}

// Close releases a retained primary context (cuDevicePrimaryCtxRelease), at once or, while
// objects made in it are open, when the last of them closes. Nothing new can be made in it
// after. It is idempotent, and does nothing for a borrowed context.
func (c *Context) Close() error {
	if err := c.valid(); err != nil {
		return err
	}
	if err := outsideHostFunc(); err != nil {
		return err
	}
	if !c.primary {
		return nil
	}
	c.fenceMu.Lock()
	if c.closed.Swap(true) {
		c.fenceMu.Unlock()
		return nil
	}
	fences := c.fences
	c.fences = nil
	c.fenceMu.Unlock()
	var err error
	for _, e := range fences {
		if e2 := e.Close(); err == nil {
			err = e2
		}
	}
	if e2 := c.release(); err == nil {
		err = e2
	}
	return err
}

// Do runs fn on a locked OS thread with c current, and restores the thread's previous
// current context afterwards. Use it to call other CUDA code that relies on the current
// context.
func (c *Context) Do(fn func() error) error {
	if err := c.valid(); err != nil {
		return err
	}
	if err := outsideHostFunc(); err != nil {
		return err
	}
	var err error
	if e := c.drv.check("cuCtxSetCurrent", c.do(func() driver.Result {
		err = fn()
		return driver.Success
	})); e != nil {
		return e
	}
	return err
}

// do is the one place a context is made current: lock the thread, switch only if another
// context is current, run fn, switch back, unlock. The caller's thread is left as found.
func (c *Context) do(fn func() driver.Result) driver.Result {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prev, r := c.api.CtxGetCurrent()
	if r != driver.Success {
		return r
	}
	if prev != c.handle {
		if r := c.api.CtxSetCurrent(c.handle); r != driver.Success {
			return r
		}
		defer c.api.CtxSetCurrent(prev)
	}
	return fn()
}

// StreamPriorityRange is cuCtxGetStreamPriorityRange: numerically lower is higher
// priority, so greatest <= least.
func (c *Context) StreamPriorityRange() (least, greatest int, err error) {
	if err := c.valid(); err != nil {
		return 0, 0, err
	}
	if err := outsideHostFunc(); err != nil {
		return 0, 0, err
	}
	r := c.do(func() (r driver.Result) {
		least, greatest, r = c.api.CtxGetStreamPriorityRange()
		return r
	})
	return least, greatest, c.drv.check("cuCtxGetStreamPriorityRange", r)
}
