package sim

// Contexts other than a device's primary one, as the real driver has them (seen on an
// H100, driver 580): a green context is made from its device's primary context (retaining
// it) and shares its objects, so an event of either is recorded on a stream of the other
// and a kernel of the primary context launches on a green context's stream; a context of
// its own (CtxCreate) shares nothing, and the driver refuses such a mix with
// CUDA_ERROR_INVALID_HANDLE. A green context's CUcontext (CtxFromGreenCtx) is the green
// context's own handle, as on the real driver.

import "github.com/streambridge/streambridge/internal/driver"

// newContext makes a context of v that is not its primary one. Caller holds d.mu.
func (d *Driver) newContext(v *device, primary *context) *context {
	c := &context{dev: v, primary: primary, own: primary == nil, blocking: map[*stream]struct{}{}}
	c.handle = driver.Context(d.newHandle(c))
	c.legacy = &stream{ctx: c, legacy: true, id: d.streamID()}
	c.ptds = map[int]*stream{}
	return c
}

// objects is the primary context whose objects c uses: its own, or, for a green context,
// its primary one's.
func (c *context) objects() *context {
	if c.primary != nil {
		return c.primary
	}
	return c
}

func (d *Driver) CtxCreate(dev driver.Device) (driver.Context, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, r := d.device(dev)
	if r != driver.Success {
		return 0, r
	}
	return d.newContext(v, nil).handle, driver.Success
}

func (d *Driver) CtxDestroy(h driver.Context) driver.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, ok := lookup[*context](d, uintptr(h))
	if !ok || !c.own {
		return driver.ErrorInvalidContext
	}
	d.destroyContext(c)
	return driver.Success
}

func (d *Driver) GreenCtxCreate(dev driver.Device) (driver.GreenContext, driver.Result) {
	if d.lacks("cuDeviceGetDevResource") || d.lacks("cuDevResourceGenerateDesc") || d.lacks("cuGreenCtxCreate") ||
		d.lacks("cuGreenCtxStreamCreate") { // as the real driver's GreenCtxCreate needs them all
		return 0, driver.ErrorNotSupported
	}
	d.mu.Lock()
	v, r := d.device(dev)
	d.mu.Unlock()
	if r != driver.Success {
		return 0, r
	}
	if _, r := d.DevicePrimaryCtxRetain(dev); r != driver.Success { // released by GreenCtxDestroy
		return 0, r
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return driver.GreenContext(d.newContext(v, v.ctx).handle), driver.Success
}

func (d *Driver) GreenCtxDestroy(g driver.GreenContext) driver.Result {
	d.mu.Lock()
	c, ok := lookup[*context](d, uintptr(g))
	if !ok || c.primary == nil {
		d.mu.Unlock()
		return driver.ErrorInvalidContext
	}
	d.destroyContext(c)
	d.mu.Unlock()
	return d.DevicePrimaryCtxRelease(driver.Device(c.dev.ordinal))
}

// destroyContext destroys c and everything made in it. Caller holds d.mu.
func (d *Driver) destroyContext(c *context) {
	d.resetContext(c)
	for tid, cur := range d.current {
		if cur == c {
			delete(d.current, tid)
		}
	}
	d.forget(uintptr(c.handle))
}

func (d *Driver) GreenCtxStreamCreate(g driver.GreenContext, flags uint32, priority int) (driver.Stream, driver.Result) {
	d.mu.Lock()
	c, ok := lookup[*context](d, uintptr(g))
	d.mu.Unlock()
	if !ok || c.primary == nil {
		return 0, driver.ErrorInvalidContext
	}
	if flags != driver.StreamNonBlocking { // as cuGreenCtxStreamCreate requires
		return 0, driver.ErrorInvalidValue
	}
	return d.StreamCreateWithPriority(driver.Context(g), flags, priority)
}

func (d *Driver) CtxFromGreenCtx(g driver.GreenContext) (driver.Context, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, ok := lookup[*context](d, uintptr(g))
	if !ok || c.primary == nil {
		return 0, driver.ErrorInvalidContext
	}
	return c.handle, driver.Success
}

// StreamGetCtx2 leaves a capture alone, unlike StreamGetCtx (seen on an H100, driver 580).
func (d *Driver) StreamGetCtx2(h driver.Stream) (driver.Context, driver.GreenContext, driver.Result) {
	if d.lacks("cuStreamGetCtx_v2") {
		return 0, 0, driver.ErrorNotSupported
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	s, r := d.stream(h)
	if r != driver.Success {
		return 0, 0, r
	}
	if s.ctx.primary != nil {
		return s.ctx.primary.handle, driver.GreenContext(s.ctx.handle), driver.Success
	}
	return s.ctx.handle, 0, driver.Success
}

// checkedContext is what StreamCheck answers of s's context, as the real check does: a
// green context's stream has the primary context it was made from (asked of the driver
// there, cuStreamGetCtx_v2); a stream of a context of its own is a live stream of a
// context not taken.
func (c *context) checkedContext() (driver.Context, driver.Result) {
	if c.own {
		return c.handle, driver.ErrorInvalidContext
	}
	return c.objects().handle, driver.Success
}
