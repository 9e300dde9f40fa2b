package sim

// Stream memory: the software driver lays its streams out in memory as the real one does
// (see driver.StreamMemory), so that code verifying a stream with plain loads (the Python
// core, before each use of a borrowed stream) runs, and is tested, on it too.

import (
	"unsafe"

	"github.com/streambridge/streambridge/internal/driver"
)

// Where a stream object keeps its handle, context and identity: not the real driver's
// words, so a reader that hard-coded those would fail here.
const (
	streamCtxAt   = 1
	streamBackAt  = 3
	streamIDAt    = 6
	streamWords   = streamIDAt + 1
	streamSlabCap = 4096 // streams alive at once with memory; more get addresses without
)

// streamMem is one stream's memory: the block its handle points to, whose first word points
// to obj.
type streamMem struct {
	block [2]uint64
	obj   [streamWords]uint64
}

// streamSlab holds every stream's memory; it is never freed or moved (Go's heap does not
// move objects), so it stays mapped for the driver's life, as the real driver's heap does.
type streamSlab struct {
	mem  []streamMem
	used int   // mem[:used] have been handed out
	free []int // destroyed streams' slots, reused last-freed first, as an allocator does
}

// place gives s a handle in the slab: a destroyed stream's block first (so a handle kept
// past its stream's destroy can name a new stream, as on the real driver), else a new one;
// an address outside it once the slab is full. Caller holds d.mu.
func (d *Driver) place(s *stream) uintptr {
	sl := &d.streams
	if sl.mem == nil {
		sl.mem = make([]streamMem, streamSlabCap)
	}
	var i int
	switch {
	case len(sl.free) > 0:
		i, sl.free = sl.free[len(sl.free)-1], sl.free[:len(sl.free)-1]
	case sl.used < len(sl.mem):
		i = sl.used
		sl.used++
	default:
		return d.newHandle(s)
	}
	m := &sl.mem[i]
	h := uintptr(unsafe.Pointer(&m.block))
	m.obj = [streamWords]uint64{}
	m.obj[streamBackAt] = uint64(h)
	m.obj[streamCtxAt] = uint64(s.ctx.handle)
	m.obj[streamIDAt] = s.id
	m.block[0] = uint64(uintptr(unsafe.Pointer(&m.obj)))
	d.objects[h] = s
	return h
}

// unplace frees a stream's slot: like an allocator's free, it overwrites the block's first
// word (with the slot freed before it, a free-list link), so the chain no longer leads back
// to the handle. False where h is not in the slab. Caller holds d.mu.
func (d *Driver) unplace(h uintptr) bool {
	sl := &d.streams
	lo, hi := sl.bounds()
	size := unsafe.Sizeof(streamMem{})
	if h < lo || h >= hi || (h-lo)%size != 0 {
		return false
	}
	i := int((h - lo) / size)
	link := lo // the slab's first block: what an allocator's next pointer would be, in the heap
	if n := len(sl.free); n > 0 {
		link = uintptr(unsafe.Pointer(&sl.mem[sl.free[n-1]].block))
	}
	sl.mem[i].block[0] = uint64(link)
	sl.free = append(sl.free, i)
	return true
}

// StreamMemory describes the slab (see driver.StreamMemory).
func (d *Driver) StreamMemory() driver.StreamMemory {
	d.mu.Lock()
	defer d.mu.Unlock()
	lo, hi := d.streams.bounds()
	return driver.StreamMemory{BackAt: streamBackAt, CtxAt: streamCtxAt, IDAt: streamIDAt, Words: streamWords, Lo: lo, Hi: hi, OK: hi != 0}
}

// bounds is the slab's memory, [lo, hi); 0, 0 before the first stream.
func (sl *streamSlab) bounds() (lo, hi uintptr) {
	if len(sl.mem) == 0 {
		return 0, 0
	}
	lo = uintptr(unsafe.Pointer(&sl.mem[0]))
	return lo, lo + uintptr(len(sl.mem))*unsafe.Sizeof(streamMem{})
}
