package streams

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/streambridge/streambridge/internal/driver"
)

// DevicePtr is a CUdeviceptr: an address in device memory.
type DevicePtr = driver.DevicePtr

// Buffer is device memory from cuMemAlloc. Close frees it.
type Buffer struct {
	ctx  *Context
	ptr  DevicePtr
	size uint64
	uses uses // open, and the calls in flight: Close's free waits for the last (uses.go)
}

// Alloc allocates size bytes of device memory in c (cuMemAlloc).
func (c *Context) Alloc(size uint64) (*Buffer, error) {
	if err := c.acquire(); err != nil {
		return nil, err
	}
	var p DevicePtr
	r := c.do(func() (r driver.Result) { p, r = c.api.MemAlloc(size); return r })
	if err := c.drv.check("cuMemAlloc", r); err != nil {
		c.release()
		return nil, err
	}
	return &Buffer{ctx: c, ptr: p, size: size}, nil
}

// Ptr is the buffer's device address.
func (b *Buffer) Ptr() DevicePtr {
	if b == nil {
		return 0
	}
	return b.ptr
}

// Size is the buffer's length in bytes.
func (b *Buffer) Size() uint64 {
	if b == nil {
		return 0
	}
	return b.size
}

// Close frees the buffer (cuMemFree). It is idempotent; a copy in flight on another
// goroutine keeps the memory until it returns, and a graph a copy of it was captured into
// until the graph and its executables are destroyed. A kernel's pointer arguments keep
// nothing: free a buffer a graph's kernels use after the graph.
func (b *Buffer) Close() error {
	if b == nil {
		return ErrNil
	}
	if b.ctx == nil {
		return errZero("Buffer")
	}
	_, err := b.uses.close(b)
	return err
}

func (b *Buffer) destroy() error {
	r := b.ctx.do(func() driver.Result { return b.ctx.api.MemFree(b.ptr) })
	err := b.ctx.drv.check("cuMemFree", r)
	if e := b.ctx.release(); err == nil {
		err = e
	}
	return err
}

// hostSpan takes a use of b (see uses) for a copy between it and host, which must fit in
// it: the host address and the length in bytes. The caller gives the use back with
// b.uses.leave(b, goroutine()).
func hostSpan[T any](b *Buffer, host []T) (unsafe.Pointer, uint64, error) {
	if b == nil {
		return nil, 0, ErrNil
	}
	if b.ctx == nil {
		return nil, 0, errZero("Buffer")
	}
	n := uint64(len(host)) * uint64(unsafe.Sizeof(*new(T)))
	if n > b.size {
		return nil, 0, fmt.Errorf("streambridge: copy of %d bytes into a buffer of %d", n, b.size)
	}
	if err := b.uses.enter(b, goroutine()); err != nil {
		return nil, 0, err
	}
	if n == 0 {
		return nil, 0, nil
	}
	return unsafe.Pointer(&host[0]), n, nil
}

// CopyToDevice copies src to the start of b and returns when the copy is done
// (cuMemcpyHtoD).
func CopyToDevice[T any](b *Buffer, src []T) error {
	p, n, err := hostSpan(b, src)
	if err != nil {
		return err
	}
	defer b.uses.leave(b, goroutine())
	if n == 0 {
		return nil
	}
	r := b.copySync(func() driver.Result { return b.ctx.api.MemcpyHtoD(b.ptr, p, n) })
	runtime.KeepAlive(src)
	return b.ctx.drv.check("cuMemcpyHtoD", r)
}

// CopyFromDevice copies the start of b into dst and returns when the copy is done
// (cuMemcpyDtoH).
func CopyFromDevice[T any](dst []T, b *Buffer) error {
	p, n, err := hostSpan(b, dst)
	if err != nil {
		return err
	}
	defer b.uses.leave(b, goroutine())
	if n == 0 {
		return nil
	}
	r := b.copySync(func() driver.Result { return b.ctx.api.MemcpyDtoH(p, b.ptr, n) })
	runtime.KeepAlive(dst)
	return b.ctx.drv.check("cuMemcpyDtoH", r)
}

// copySync makes a synchronous copy, which runs on the context's legacy stream, under the
// capture lock (capturelock.go) as a call on that stream: unordered, one raced captures
// begun and ended on other threads into a crash (SIGSEGV in cuMemcpyDtoH and cuMemcpyHtoD,
// H200, driver 580: the chaos soak, with only captures and copies). While a capture of ours
// goes on it holds the lock whole until the copy is done, as every call then does.
func (b *Buffer) copySync(copy func() driver.Result) driver.Result {
	d := b.ctx.drv
	lock := d.lockOp(uintptr(driver.StreamLegacy), false)
	defer d.unlockOp(lock)
	return b.ctx.do(copy)
}

// CopyToDeviceAsync enqueues a copy of src to the start of b on s (cuMemcpyHtoDAsync).
// src must stay alive and unchanged until the copy has run. Captured into a graph, the
// copy keeps b (see copyAsync).
func CopyToDeviceAsync[T any](b *Buffer, src []T, s *Stream) error {
	p, n, err := hostSpan(b, src)
	if err != nil {
		return err
	}
	defer b.uses.leave(b, goroutine())
	return copyAsync(b, n, s, "cuMemcpyHtoDAsync", func() driver.Result { return s.api.MemcpyHtoDAsync(b.ptr, p, n, s.handle) })
}

// CopyFromDeviceAsync enqueues a copy of the start of b into dst on s
// (cuMemcpyDtoHAsync). dst must stay alive until the copy has run. Captured into a graph,
// the copy keeps b (see copyAsync).
func CopyFromDeviceAsync[T any](dst []T, b *Buffer, s *Stream) error {
	p, n, err := hostSpan(b, dst)
	if err != nil {
		return err
	}
	defer b.uses.leave(b, goroutine())
	return copyAsync(b, n, s, "cuMemcpyDtoHAsync", func() driver.Result { return s.api.MemcpyDtoHAsync(p, b.ptr, n, s.handle) })
}

// copyAsync enqueues copy, of n bytes between b (whose use the caller holds) and host
// memory, on s, under the capture lock. Where s captures (whoever began the capture), the
// capture's graph keeps b (Stream.keepWhileCapturing), so b's Close meanwhile frees it only once the
// graph and every executable made from it are destroyed. A graph whose copy names freed
// memory crashed the driver (found by TestDifferentialSequences).
func copyAsync(b *Buffer, n uint64, s *Stream, name string, copy func() driver.Result) error {
	if n == 0 {
		return nil
	}
	if err := s.useWith(b.ctx.drv); err != nil {
		return err
	}
	defer s.done()
	d := s.ctx.drv
	lock := d.lockOp(uintptr(s.handle), false) // no capture of ours begins or ends between the question and the copy
	defer d.unlockOp(lock)
	if err := s.keepWhileCapturing(&b.uses, b); err != nil {
		return err
	}
	return d.check(name, s.run(copy))
}
