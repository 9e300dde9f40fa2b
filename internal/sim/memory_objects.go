package sim

// Object memory: the software driver lays its streams and events out in memory as the real
// one does (see driver.StreamMemory and driver.EventMemory), so that code verifying a
// handle with plain loads (the Python core, before each use of a borrowed stream or event)
// runs, and is tested, on it too.

import (
	"fmt"
	"os"
	"strconv"
	"unsafe"

	"github.com/streambridge/streambridge/internal/driver"
)

// objLayout is where stream objects keep their handle, context and identity, and event
// objects their context, identity and list links: not the real driver's words, so that a
// reader that hard-coded those would fail here. LayoutSetting picks one of layouts, so
// that a reader that hard-coded one of them fails on another. Some layouts lay a stream out
// as another driver might: one level of indirection more between the handle's block and
// the object (streamVia: the block's first word points to a block whose word streamVia
// points to the object), or the identity elsewhere (streamIDVia: the object's word
// streamIDVia points to a block whose word streamIDAt holds it); -1 where not. One layout
// cannot be learned (split): a blocking stream keeps its identity at another word than a
// non-blocking one, so what is learned from one kind reads the other wrong, and the driver
// describes no layout, as a real driver whose layout is not learned. Events likewise: one
// level of indirection more (eventVia: the handle's block's word eventVia points to the
// object, which holds the handle at eventBackAt, and the list links objects), or the
// identity elsewhere (eventIDVia, as streamIDVia).
type objLayout struct {
	streamCtxAt, streamBackAt, streamIDAt           int
	streamVia, streamIDVia                          int
	split                                           bool
	eventPrevAt, eventCtxAt, eventIDAt, eventNextAt int
	eventVia, eventBackAt, eventIDVia               int
}

// LayoutSetting picks the software driver's object layout: an index into layouts, 0 when
// unset.
const LayoutSetting = "STREAMBRIDGE_SIM_LAYOUT"

var layouts = []objLayout{
	{streamCtxAt: 1, streamBackAt: 3, streamIDAt: 6, streamVia: -1, streamIDVia: -1,
		eventPrevAt: 1, eventCtxAt: 2, eventIDAt: 4, eventNextAt: 5, eventVia: -1, eventBackAt: -1, eventIDVia: -1},
	{streamCtxAt: 9, streamBackAt: 0, streamIDAt: 4, streamVia: -1, streamIDVia: -1,
		eventPrevAt: 7, eventCtxAt: 11, eventIDAt: 3, eventNextAt: 0, eventVia: -1, eventBackAt: -1, eventIDVia: -1},
	{streamCtxAt: 2, streamBackAt: 13, streamIDAt: 8, streamVia: -1, streamIDVia: -1,
		eventPrevAt: 12, eventCtxAt: 0, eventIDAt: 9, eventNextAt: 15, eventVia: -1, eventBackAt: -1, eventIDVia: -1},
	{streamCtxAt: 5, streamBackAt: 7, streamIDAt: 2, streamVia: 3, streamIDVia: -1,
		eventPrevAt: 3, eventCtxAt: 6, eventIDAt: 1, eventNextAt: 8, eventVia: 2, eventBackAt: 9, eventIDVia: -1},
	{streamCtxAt: 0, streamBackAt: 4, streamIDAt: 6, streamVia: -1, streamIDVia: 9,
		eventPrevAt: 10, eventCtxAt: 4, eventIDAt: 2, eventNextAt: 13, eventVia: -1, eventBackAt: -1, eventIDVia: 7},
	{streamCtxAt: 3, streamBackAt: 1, streamIDAt: 5, streamVia: -1, streamIDVia: -1, split: true,
		eventPrevAt: 1, eventCtxAt: 2, eventIDAt: 4, eventNextAt: 5, eventVia: -1, eventBackAt: -1, eventIDVia: -1},
}

// LearnableLayouts is how many layouts, from the first, can be learned: the rest are split.
func LearnableLayouts() int {
	n := 0
	for n < len(layouts) && !layouts[n].split {
		n++
	}
	return n
}

// Layout is the layout LayoutSetting picks; any value other than an index of layouts is
// an error naming the setting.
func Layout() (int, error) {
	v := os.Getenv(LayoutSetting)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n >= len(layouts) {
		return 0, fmt.Errorf("%s=%q: want a layout from 0 to %d", LayoutSetting, v, len(layouts)-1)
	}
	return n, nil
}

// Layouts is how many layouts there are to pick.
func Layouts() int { return len(layouts) }

// splitIDAt is where a split layout's blocking streams keep their identity.
const splitIDAt = 11

func (l objLayout) streamWords() int {
	w := driver.StreamMemory{BackAt: l.streamBackAt, CtxAt: l.streamCtxAt, IDAt: l.streamIDAt, IDVia: l.streamIDVia}.ObjectWords()
	if l.split {
		w = max(w, splitIDAt+1)
	}
	return w
}

// eventMemory is the events' description without its bounds.
func (l objLayout) eventMemory() driver.EventMemory {
	m := driver.EventMemory{CtxAt: l.eventCtxAt, IDAt: l.eventIDAt, NextAt: l.eventNextAt, PrevAt: l.eventPrevAt,
		ObjVia: l.eventVia, BackAt: l.eventBackAt, IDVia: l.eventIDVia}
	m.Words = m.ObjectWords()
	return m
}

const (
	objWords = 16   // room for every layout's words
	slabCap  = 4096 // streams (and events) alive at once with memory; more get addresses without
)

// streamMem is one stream's memory: the block its handle points to, whose first word points
// to obj (or to mid, whose word streamVia does), and the block holding its identity where
// the layout keeps it elsewhere. The identity's block lies before the others and mid after
// obj, so that no read of an object's words from its start (a learner reads 64) runs into
// the blocks it points to.
type streamMem struct {
	ids   [objWords]uint64
	block [2]uint64
	obj   [objWords]uint64
	mid   [objWords]uint64
}

// eventMem is one event's memory: the object, which its handle points to (or, where the
// layout has eventVia, the block whose word eventVia does), and the block holding its
// identity where the layout keeps it elsewhere. The list links objects.
type eventMem struct {
	ids   [objWords]uint64
	obj   [objWords]uint64
	block [objWords]uint64
}

// handle is the address m's handle names.
func (m *eventMem) handle(l objLayout) uintptr { return uintptr(unsafe.Pointer(m)) + l.eventHandleAt() }

// eventHandleAt is where in an event's memory its handle points: its object, or its block.
func (l objLayout) eventHandleAt() uintptr {
	if l.eventVia >= 0 {
		return unsafe.Offsetof(eventMem{}.block)
	}
	return unsafe.Offsetof(eventMem{}.obj)
}

// eventAt is the event memory whose object is at address o, or nil.
func (d *Driver) eventAt(o uintptr) *eventMem {
	return d.events.at(o - unsafe.Offsetof(eventMem{}.obj))
}

// slab holds objects' memory; it is never freed or moved (Go's heap does not move
// objects), so it stays mapped for the driver's life, as the real driver's heap does.
type slab[M any] struct {
	mem  []M
	used int   // mem[:used] have been handed out
	free []int // freed slots, reused last-freed first, as an allocator does
}

// take hands out a slot: a freed one first (so a handle kept past its object's destroy can
// name a new object, as on the real driver), else a new one; nil once the slab is full.
func (sl *slab[M]) take() *M {
	if sl.mem == nil {
		sl.mem = make([]M, slabCap)
	}
	var i int
	switch {
	case len(sl.free) > 0:
		i, sl.free = sl.free[len(sl.free)-1], sl.free[:len(sl.free)-1]
	case sl.used < len(sl.mem):
		i = sl.used
		sl.used++
	default:
		return nil
	}
	return &sl.mem[i]
}

// index is the slot at address h; false where h is not one of the slab's.
func (sl *slab[M]) index(h uintptr) (int, bool) {
	lo, hi := sl.bounds()
	size := unsafe.Sizeof(*new(M))
	if h < lo || h >= hi || (h-lo)%size != 0 {
		return 0, false
	}
	return int((h - lo) / size), true
}

// at is the slot at address h, or nil.
func (sl *slab[M]) at(h uintptr) *M {
	if i, ok := sl.index(h); ok {
		return &sl.mem[i]
	}
	return nil
}

// give frees the slot at address h and returns it with the address of the slot freed
// before it (the slab's first slot if none: what an allocator's next pointer would be, in
// the heap); nil where h is not a slot of the slab.
func (sl *slab[M]) give(h uintptr) (m *M, link uintptr) {
	i, ok := sl.index(h)
	if !ok {
		return nil, 0
	}
	link, _ = sl.bounds()
	if n := len(sl.free); n > 0 {
		link = uintptr(unsafe.Pointer(&sl.mem[sl.free[n-1]]))
	}
	sl.free = append(sl.free, i)
	return &sl.mem[i], link
}

// bounds is the slab's memory, [lo, hi); 0, 0 before the first object.
func (sl *slab[M]) bounds() (lo, hi uintptr) {
	if len(sl.mem) == 0 {
		return 0, 0
	}
	lo = uintptr(unsafe.Pointer(&sl.mem[0]))
	return lo, lo + uintptr(len(sl.mem))*unsafe.Sizeof(*new(M))
}

// place gives s a handle in the stream slab, or an address outside it once the slab is
// full. Caller holds d.mu.
func (d *Driver) place(s *stream) uintptr {
	m := d.streams.take()
	if m == nil {
		return d.newHandle(s)
	}
	h := uintptr(unsafe.Pointer(&m.block))
	l := d.layout
	m.obj, m.mid, m.ids = [objWords]uint64{}, [objWords]uint64{}, [objWords]uint64{}
	m.obj[l.streamBackAt] = uint64(h)
	m.obj[l.streamCtxAt] = uint64(s.ctx.handle)
	switch {
	case l.split && s.flags&driver.StreamNonBlocking == 0:
		m.obj[splitIDAt] = s.id
	case l.streamIDVia >= 0:
		m.ids[l.streamIDAt] = s.id
		m.obj[l.streamIDVia] = uint64(uintptr(unsafe.Pointer(&m.ids)))
	default:
		m.obj[l.streamIDAt] = s.id
	}
	m.block[0] = uint64(uintptr(unsafe.Pointer(&m.obj)))
	if l.streamVia >= 0 {
		m.mid[l.streamVia] = m.block[0]
		m.block[0] = uint64(uintptr(unsafe.Pointer(&m.mid)))
	}
	d.objects[h] = s
	return h
}

// placeEvent gives e a handle in the event slab, last in its context's list, with a new
// identity, or an address outside it once the slab is full. Caller holds d.mu.
func (d *Driver) placeEvent(e *event) uintptr {
	e.id = d.streamID()
	m := d.events.take()
	if m == nil {
		return d.newHandle(e)
	}
	l := d.layout
	h := m.handle(l)
	*m = eventMem{}
	o := &m.obj
	o[l.eventCtxAt] = uint64(e.ctx.handle)
	if l.eventIDVia >= 0 {
		m.ids[l.eventIDAt] = e.id
		o[l.eventIDVia] = uint64(uintptr(unsafe.Pointer(&m.ids)))
	} else {
		o[l.eventIDAt] = e.id
	}
	if l.eventVia >= 0 {
		m.block[l.eventVia] = uint64(uintptr(unsafe.Pointer(o)))
		o[l.eventBackAt] = uint64(h)
	}
	if last := e.ctx.lastEvent; last != nil {
		o[l.eventPrevAt] = uint64(uintptr(unsafe.Pointer(&last.obj)))
		last.obj[l.eventNextAt] = uint64(uintptr(unsafe.Pointer(o)))
	}
	e.ctx.lastEvent = m
	d.objects[h] = e
	return h
}

// unplace frees an object's slot: a stream's block has its first word overwritten (a
// free-list link, as an allocator's free does), so the chain no longer leads back to the
// handle; an event leaves its context's list, so no neighbour points back to it, and has
// its first words overwritten too. False where h is not in a slab. Caller holds d.mu.
func (d *Driver) unplace(h uintptr) bool {
	switch o := d.objects[h].(type) {
	case *stream:
		m, link := d.streams.give(h - unsafe.Offsetof(streamMem{}.block)) // the handle is the block's address
		if m != nil {
			m.block[0] = uint64(link)
		}
		return m != nil
	case *event:
		l := d.layout
		m, link := d.events.give(h - l.eventHandleAt())
		if m == nil {
			return false
		}
		prev, next := d.eventAt(uintptr(m.obj[l.eventPrevAt])), d.eventAt(uintptr(m.obj[l.eventNextAt]))
		if prev != nil {
			prev.obj[l.eventNextAt] = m.obj[l.eventNextAt]
		}
		if next != nil {
			next.obj[l.eventPrevAt] = m.obj[l.eventPrevAt]
		} else if o.ctx.lastEvent == m {
			o.ctx.lastEvent = prev
		}
		m.obj = [objWords]uint64{uint64(link), 0x5a5a5a5a5a5a5a5a} // what free leaves: a link and a key
		m.block[0], m.block[1] = uint64(link), 0x5a5a5a5a5a5a5a5a  // the handle's block is freed too
		return true
	}
	return false
}

// StreamMemory describes the stream slab (see driver.StreamMemory).
func (d *Driver) StreamMemory() driver.StreamMemory {
	d.mu.Lock()
	defer d.mu.Unlock()
	lo, hi := d.streams.bounds()
	l := d.layout
	return driver.StreamMemory{BackAt: l.streamBackAt, CtxAt: l.streamCtxAt, IDAt: l.streamIDAt, Words: l.streamWords(),
		ObjVia: l.streamVia, IDVia: l.streamIDVia, Lo: lo, Hi: hi, OK: hi != 0 && !d.unlearnable}
}

// EventMemory describes the event slab (see driver.EventMemory).
func (d *Driver) EventMemory() driver.EventMemory {
	d.mu.Lock()
	defer d.mu.Unlock()
	lo, hi := d.events.bounds()
	l := d.layout
	m := l.eventMemory()
	m.Lo, m.Hi, m.OK = lo, hi, hi != 0 && !d.unlearnable
	return m
}
