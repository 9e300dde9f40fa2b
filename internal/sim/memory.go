package sim

// Modules and launches (not supported: no device code), allocations and copies.

import (
	"unsafe"

	"github.com/streambridge/streambridge/internal/driver"
)

func (d *Driver) ModuleLoadData(unsafe.Pointer) (driver.Module, driver.Result) {
	return 0, driver.ErrorNotSupported
}

func (d *Driver) ModuleUnload(driver.Module) driver.Result { return driver.ErrorInvalidHandle }

func (d *Driver) ModuleGetFunction(driver.Module, string) (driver.Function, driver.Result) {
	return 0, driver.ErrorInvalidHandle
}

func (d *Driver) LaunchKernel(driver.Context, driver.Function, uint32, uint32, uint32, uint32, uint32, uint32,
	uint32, driver.Stream, unsafe.Pointer) driver.Result {
	return driver.ErrorNotSupported
}

func (d *Driver) MemAlloc(bytes uint64) (driver.DevicePtr, driver.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.currentCtx()
	if c == nil {
		return 0, driver.ErrorInvalidContext
	}
	if bytes == 0 {
		return 0, driver.ErrorInvalidValue
	}
	if bytes > DeviceMemory-c.dev.used {
		return 0, driver.ErrorOutOfMemory
	}
	c.dev.used += bytes
	h := d.nextAddr
	a := &allocation{ctx: c, buf: make([]byte, bytes), base: h}
	d.nextAddr += (uintptr(bytes) + 0xfff) &^ 0xfff
	d.objects[h] = a
	return driver.DevicePtr(h), driver.Success
}

// MemFree synchronizes the allocation's context first, as the real driver's does
// (driver.API's MemFree): it frees once the context's work enqueued before it has run.
func (d *Driver) MemFree(p driver.DevicePtr) driver.Result {
	d.mu.Lock()
	var work []chan struct{}
	if a, ok := d.objects[uintptr(p)].(*allocation); ok {
		work = d.pending(a.ctx)
	}
	d.mu.Unlock()
	for _, done := range work {
		<-done
	}
	return d.destroy(uintptr(p), func(o any) bool { _, ok := o.(*allocation); return ok })
}

// span finds the bytes [p, p+n) of one allocation. Caller holds d.mu.
func (d *Driver) span(p driver.DevicePtr, n uint64) (*allocation, []byte, driver.Result) {
	for base, o := range d.objects {
		a, ok := o.(*allocation)
		if !ok || uint64(p) < uint64(base) || uint64(p) >= uint64(base)+uint64(len(a.buf)) {
			continue
		}
		off := uint64(p) - uint64(base)
		if off+n > uint64(len(a.buf)) {
			return nil, nil, driver.ErrorInvalidValue
		}
		return a, a.buf[off : off+n], driver.Success
	}
	return nil, nil, driver.ErrorInvalidValue
}

func hostBytes(p unsafe.Pointer, n uint64) []byte { return unsafe.Slice((*byte)(p), n) }

// copyOn enqueues a copy on s, or on the legacy stream of the allocation's context and
// waits for it when s is nil (the synchronous copies).
func (d *Driver) copyOn(sh *driver.Stream, p driver.DevicePtr, n uint64, cp func(dev []byte)) driver.Result {
	d.mu.Lock()
	a, dev, r := d.span(p, n)
	if r != driver.Success {
		d.mu.Unlock()
		return r
	}
	s := a.ctx.legacy
	if sh != nil {
		s, r = d.captureWork(0, *sh) // an invalidated capture refuses copies as any work (bench/capture_lifetimes.c, case 27)
	} else {
		r = implicit(s)
	}
	if r != driver.Success {
		d.mu.Unlock()
		return r
	}
	run := func() {
		d.copies.Lock()
		defer d.copies.Unlock()
		cp(dev)
	}
	done := d.submit(s, run)
	if done == nil { // captured: the node is the capture's frontier now
		s.frontier[0].mem = a
	}
	d.mu.Unlock()
	if sh == nil && done != nil {
		<-done
	}
	return driver.Success
}

func (d *Driver) MemcpyHtoD(dst driver.DevicePtr, src unsafe.Pointer, n uint64) driver.Result {
	return d.copyOn(nil, dst, n, func(dev []byte) { copy(dev, hostBytes(src, n)) })
}

func (d *Driver) MemcpyDtoH(dst unsafe.Pointer, src driver.DevicePtr, n uint64) driver.Result {
	return d.copyOn(nil, src, n, func(dev []byte) { copy(hostBytes(dst, n), dev) })
}

func (d *Driver) MemcpyHtoDAsync(dst driver.DevicePtr, src unsafe.Pointer, n uint64, s driver.Stream) driver.Result {
	return d.copyOn(&s, dst, n, func(dev []byte) { copy(dev, hostBytes(src, n)) })
}

func (d *Driver) MemcpyDtoHAsync(dst unsafe.Pointer, src driver.DevicePtr, n uint64, s driver.Stream) driver.Result {
	return d.copyOn(&s, src, n, func(dev []byte) { copy(hostBytes(dst, n), dev) })
}
