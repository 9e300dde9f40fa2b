package cuda

import (
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/streambridge/streambridge/internal/driver"
)

// The driver dereferences a stream handle, so a garbage integer or a destroyed stream's
// handle kills the process (SIGSEGV, seen on an H200). StreamCheck decides whether an
// integer is a live stream before the driver sees it, reading memory only with
// process_vm_readv on this process, which fails with EFAULT where a load would fault.
//
// What it checks is learned at run time from a stream this package creates, so it follows
// the driver's layout rather than hard-coding it: a handle points to a block whose first
// word points to the stream object, and that object holds the handle (a back-pointer) and
// its context, whose first words are a context's header. On driver 580 the object holds
// the handle at word 10 and the context at word 2. A destroyed stream's block is freed,
// and the allocator overwrites its first word, so its chain no longer leads back to it.
// Where no such layout is found the check refuses every handle it cannot prove.

type streamLayout struct {
	ok            bool
	backAt, ctxAt int // word offsets in the stream object
	objWords      int
}

var (
	layoutOnce sync.Once
	layout     streamLayout

	// The first two words of every active primary context seen: a candidate's context
	// must start like one. Learned from contexts that are already active, so validation
	// never initializes a GPU; refreshed when a candidate's context is not among them.
	headersMu sync.Mutex
	headers   map[[2]uint64]bool
)

// peek reads len(words) words at addr; false where any of it is not mapped readable.
func peek(addr uintptr, words []uint64) bool {
	if addr == 0 || addr%8 != 0 {
		return false
	}
	n := len(words) * 8
	local := []unix.Iovec{{Base: (*byte)(unsafe.Pointer(&words[0]))}}
	local[0].SetLen(n)
	remote := []unix.RemoteIovec{{Base: addr, Len: n}}
	got, err := unix.ProcessVMReadv(os.Getpid(), local, remote, 0)
	return err == nil && got == n
}

const layoutSearchWords = 64

// learnLayout creates a stream in device 0's primary context and finds where its object
// keeps the handle and the context.
func (d *Driver) learnLayout() streamLayout {
	dev, r := d.DeviceGet(0)
	if r != driver.Success {
		return streamLayout{}
	}
	ctx, r := d.DevicePrimaryCtxRetain(dev)
	if r != driver.Success {
		return streamLayout{}
	}
	defer d.DevicePrimaryCtxRelease(dev)
	s, r := d.StreamCreateWithPriority(ctx, driver.StreamNonBlocking, 0)
	if r != driver.Success {
		return streamLayout{}
	}
	defer d.StreamDestroy(s)
	var head [1]uint64
	obj := make([]uint64, layoutSearchWords)
	if !peek(uintptr(s), head[:]) || !peek(uintptr(head[0]), obj) {
		return streamLayout{}
	}
	l := streamLayout{backAt: -1, ctxAt: -1}
	for i, w := range obj {
		if uintptr(w) == uintptr(s) && l.backAt < 0 {
			l.backAt = i
		}
		if uintptr(w) == uintptr(ctx) && l.ctxAt < 0 {
			l.ctxAt = i
		}
	}
	if l.backAt < 0 || l.ctxAt < 0 {
		return streamLayout{}
	}
	l.ok = true
	l.objWords = max(l.backAt, l.ctxAt) + 1
	return l
}

// learnHeaders reads the header of every device's primary context that is active.
func (d *Driver) learnHeaders() map[[2]uint64]bool {
	found := map[[2]uint64]bool{}
	n, r := d.DeviceGetCount()
	if r != driver.Success {
		return found
	}
	for i := range n {
		dev, r := d.DeviceGet(i)
		if r != driver.Success {
			continue
		}
		rs, _, active := callOut2In(0, cuDevicePrimaryCtxGetState, 1, uintptr(dev), 0, 0)
		if res(rs) != driver.Success || uint32(active) == 0 {
			continue
		}
		ctx, r := d.DevicePrimaryCtxRetain(dev) // active already: nothing is initialized
		if r != driver.Success {
			continue
		}
		var hdr [2]uint64
		if peek(uintptr(ctx), hdr[:]) && hdr != [2]uint64{} {
			found[hdr] = true
		}
		d.DevicePrimaryCtxRelease(dev)
	}
	return found
}

func (d *Driver) knownHeader(hdr [2]uint64) bool {
	headersMu.Lock()
	defer headersMu.Unlock()
	if headers[hdr] {
		return true
	}
	headers = d.learnHeaders()
	return headers[hdr]
}

// StreamCheck reports whether h is a live stream of this driver: driver.Success, or
// ErrorInvalidHandle for anything else; ErrorNotSupported where the driver's layout could
// not be learned, so nothing can be proven. The special handles 0, 1 and 2 are the
// caller's to judge.
func (d *Driver) StreamCheck(h driver.Stream) driver.Result {
	if h.IsSpecial() {
		return driver.Success
	}
	if uintptr(h) < 4096 || uintptr(h)%8 != 0 || uint64(h) >= 1<<47 {
		return driver.ErrorInvalidHandle
	}
	layoutOnce.Do(func() { layout = d.learnLayout() })
	if !layout.ok {
		return driver.ErrorNotSupported
	}
	var head [1]uint64
	var objBuf [layoutSearchWords]uint64
	obj := objBuf[:layout.objWords]
	if !peek(uintptr(h), head[:]) || !peek(uintptr(head[0]), obj) || uintptr(obj[layout.backAt]) != uintptr(h) {
		return driver.ErrorInvalidHandle
	}
	var hdr [2]uint64
	if !peek(uintptr(obj[layout.ctxAt]), hdr[:]) || !d.knownHeader(hdr) {
		return driver.ErrorInvalidHandle
	}
	return driver.Success
}
