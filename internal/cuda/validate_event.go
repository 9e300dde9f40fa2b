package cuda

import (
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/streambridge/streambridge/internal/driver"
)

// EventCheck decides whether an integer is a live event before the driver sees it, as
// StreamCheck does for streams (a garbage CUevent kills the process in cuEventQuery, seen
// on an H100), reading memory the same fault-safe way.
//
// What it checks is learned at run time from events this package creates: a handle points
// to the event object (or to a block that points to it, and the object names the handle
// back: a level of indirection more, as another driver may have), which holds its context,
// its identity (a counter the driver gives each event it creates: a new event at a freed
// event's address has another; there or in a block it points to), and the objects of the
// events made after and before it in the same context (a doubly linked list per context).
// On driver 580 those are words 0, 3, 1 and 2 of the object the handle points to. What is
// learned is driver.EventMemory, the one description the C core reads by too; the software
// driver declares its own on each of its layouts (TestTheLearnerOnEverySimLayout). A live
// event is in its context's list: a neighbour points back to it. A destroyed one is out of
// the list and its memory freed (the allocator overwrites its first two words). A stream
// handle, or any other pointer, names no primary context at the context's word, or has no
// neighbour pointing back.
//
// An event alone in its context has no neighbour: where a candidate names none, the check
// makes an event in its context (a sentinel, never destroyed: it goes with the context)
// and reads the links again; every live event of the context then has a neighbour. No
// sentinel is kept track of: one that names no neighbour says by itself that none lives
// in its context any more (its context released and made again at the same address can
// leave an old sentinel's memory reading as it did, which a kept one's check trusted: a
// live event refused on an H100).

// eventLayout is the learned description of event objects (driver.EventMemory): OK once
// learned and trusted; Lo is filled where it is handed over (Driver.EventMemory).
type eventLayout driver.EventMemory

var (
	eventLayoutLearning driver.Learning // evLayout is set once it is Done
	evLayout            eventLayout
	events              eventProver // the real driver's
)

// eventProver is what the event check keeps beside the layout, over any driver (the real
// one's is events; tests run one over the software driver): the active primary contexts
// seen, a candidate's context must be one. Refreshed when a candidate names one not among
// them; read with no lock, replaced whole under mu.
type eventProver struct {
	mu        sync.Mutex
	primaries atomic.Pointer[map[driver.Context]bool]
}

// learnEventLayout creates three events in device 0's primary context, one after another,
// and finds the words that hold the context, the list links and the identity (increasing
// from one event to the next): in the object each handle points to, else (no word there
// links the three) in the object a word of each handle's block points to, which must then
// name its handle back.
func learnEventLayout(api driver.API) eventLayout {
	ctx, done, ok := device0(api)
	if !ok {
		return eventLayout{}
	}
	defer done()
	var evs [3]uint64
	for i := range evs {
		e, r := api.EventCreate(ctx, driver.EventDisableTiming)
		if r != driver.Success {
			return eventLayout{}
		}
		defer api.EventDestroy(e)
		evs[i] = uint64(e)
	}
	words, ok := readEach(evs) // once all three are made: each links to the next
	if !ok {
		return eventLayout{}
	}
	l, found := eventWordsOf(evs, evs, words, uint64(ctx), -1)
	for via := 0; !found && via < layoutSearchWords; via++ {
		objs := [3]uint64{words[0][via], words[1][via], words[2][via]}
		if w, ok := readEach(objs); ok {
			l, found = eventWordsOf(evs, objs, w, uint64(ctx), via)
		}
	}
	if !found {
		return eventLayout{}
	}
	samples, ok := eventsMadeOtherWays(api, ctx)
	defer func() {
		for _, s := range samples {
			api.EventDestroy(s.e)
		}
	}()
	if !ok || !l.holds(samples) {
		return eventLayout{} // learned from too few: nothing is proven rather than garbage accepted
	}
	l.OK = true
	return l
}

// eventWordsOf finds, in the words of three events' objects (at addresses objs, made one
// after another in context ctx, with handles hs), where each keeps its context, its links
// and its identity (there, else in a block a word of it points to), and, where via is not
// -1 (the objects are not at their handles), its handle.
func eventWordsOf(hs, objs [3]uint64, w [3][]uint64, ctx uint64, via int) (eventLayout, bool) {
	l := eventLayout{CtxAt: -1, IDAt: -1, NextAt: -1, PrevAt: -1, ObjVia: via, BackAt: -1, IDVia: -1}
	a, b, c := w[0], w[1], w[2]
	counter := func(a, b, c uint64) bool { return 0 < a && a < b && b < c && c-a < 64 } // events made meanwhile by other threads may be between
	for i := range a {
		switch {
		case l.CtxAt < 0 && a[i] == ctx && b[i] == ctx && c[i] == ctx:
			l.CtxAt = i
		case l.NextAt < 0 && a[i] == objs[1] && b[i] == objs[2]:
			l.NextAt = i
		case l.PrevAt < 0 && b[i] == objs[0] && c[i] == objs[1]:
			l.PrevAt = i
		case via >= 0 && l.BackAt < 0 && a[i] == hs[0] && b[i] == hs[1] && c[i] == hs[2]:
			l.BackAt = i
		case l.IDAt < 0 && counter(a[i], b[i], c[i]):
			l.IDAt = i
		}
	}
	for i := 0; l.IDAt < 0 && i < len(a); i++ {
		if i == l.CtxAt || i == l.NextAt || i == l.PrevAt || i == l.BackAt || !driver.PointerLike(a[i]) {
			continue
		}
		box, ok := readEach([3]uint64{a[i], b[i], c[i]})
		for at := 0; ok && l.IDAt < 0 && at < layoutSearchWords; at++ {
			if counter(box[0][at], box[1][at], box[2][at]) {
				l.IDVia, l.IDAt = i, at
			}
		}
	}
	if l.CtxAt < 0 || l.IDAt < 0 || l.NextAt < 0 || l.PrevAt < 0 || (via >= 0 && l.BackAt < 0) {
		return eventLayout{}, false
	}
	l.Words = driver.EventMemory(l).ObjectWords()
	return l, true
}

// readEach reads layoutSearchWords words at each of three addresses with process_vm_readv
// (the learner's: what it follows may be anything); false where one is not a pointer or
// not readable.
func readEach(at [3]uint64) ([3][]uint64, bool) {
	var w [3][]uint64
	for i, a := range at {
		w[i] = make([]uint64, layoutSearchWords)
		if !driver.PointerLike(a) || !(reader{}).peek(uintptr(a), w[i]) {
			return w, false
		}
	}
	return w, true
}

// eventSample is an event the driver made, with the context its object must hold.
type eventSample struct {
	e   driver.Event
	ctx driver.Context
}

// eventsMadeOtherWays makes the events a layout learned from plain ones must also read right
// before it is trusted: one of each other flag (timing, blocking sync, interprocess), one
// made on another OS thread (its object may lie in that thread's malloc arena), and two in
// each other device's primary context that is active already (two: each is the other's
// neighbour). The caller destroys them.
func eventsMadeOtherWays(api driver.API, ctx driver.Context) ([]eventSample, bool) {
	var samples []eventSample
	add := func(c driver.Context, flags uint32) bool {
		e, r := api.EventCreate(c, flags)
		if r != driver.Success {
			return false
		}
		samples = append(samples, eventSample{e, c})
		return true
	}
	ok := add(ctx, driver.EventDefault) && add(ctx, driver.EventBlockingSync) &&
		add(ctx, driver.EventInterprocess|driver.EventDisableTiming)
	ok = elsewhere(api, ctx, func(c driver.Context) bool {
		if c == ctx {
			return add(c, driver.EventDisableTiming)
		}
		return add(c, driver.EventDisableTiming) && add(c, driver.EventDisableTiming) // each the other's neighbour
	}) && ok
	return samples, ok
}

// holds reports whether l reads every sample right: its context at CtxAt, linked into its
// context's list (a neighbour points back), and an identity of its own.
func (l *eventLayout) holds(samples []eventSample) bool {
	obj := make([]uint64, l.Words)
	ids := map[uint64]bool{}
	for _, s := range samples {
		id, linked, ok := (reader{}).eventChain(uintptr(s.e), l, obj) // known good: process_vm_readv will do
		if !ok || !linked || driver.Context(obj[l.CtxAt]) != s.ctx || ids[id] {
			return false
		}
		ids[id] = true
	}
	return true
}

// eventChain reads a candidate event: its object (the first len(obj) words; through the
// handle's block where the layout has a level more, and then the object must name the
// handle back), its identity, and, for each neighbour it names, whether that neighbour
// points back to the object; one fault-protected region. linked: some neighbour points
// back; ok false: unreadable, not named back, or a neighbour that does not point back.
func (r reader) eventChain(h uintptr, l *eventLayout, obj []uint64) (id uint64, linked, ok bool) {
	if r.loads {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer unfault(&ok)
	}
	var w [1]uint64
	o, read := r.eventObject(h, l)
	if !read || !r.read(o, obj) || (l.ObjVia >= 0 && uintptr(obj[l.BackAt]) != h) {
		return 0, false, false
	}
	if id, ok = r.identity(obj, l.IDAt, l.IDVia); !ok {
		return 0, false, false
	}
	for _, n := range [2]struct{ at, backAt int }{{l.NextAt, l.PrevAt}, {l.PrevAt, l.NextAt}} {
		next := uintptr(obj[n.at])
		if next == 0 {
			continue
		}
		if !r.read(next+uintptr(n.backAt)*8, w[:]) || uintptr(w[0]) != o {
			return 0, false, false
		}
		linked = true
	}
	return id, linked, true
}

// eventObject is the address of a candidate event's object: h, or the word of h's block
// the layout names; false where that word is unreadable. Called inside a fault-protected
// region.
func (r reader) eventObject(h uintptr, l *eventLayout) (uintptr, bool) {
	if l.ObjVia < 0 {
		return h, true
	}
	var w [1]uint64
	ok := r.read(h+uintptr(l.ObjVia)*8, w[:])
	return uintptr(w[0]), ok
}

// primaryContext reports whether ctx is an active primary context of api, learning them
// again when it is not among those seen.
func (p *eventProver) primaryContext(api driver.API, ctx driver.Context) bool {
	if known := p.primaries.Load(); known != nil && (*known)[ctx] {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if known := p.primaries.Load(); known != nil && (*known)[ctx] {
		return true
	}
	found := map[driver.Context]bool{}
	eachActivePrimary(api, func(c driver.Context) { found[c] = true })
	p.primaries.Store(&found)
	return found[ctx]
}

// check is the event check of h by l over api (see EventCheck), h plausible as an address:
// its chain read, then, where it names no neighbour, a sentinel made in its context (outside
// the embedder's lock: driver.AroundWait) and the chain read again.
func (p *eventProver) check(api driver.API, l *eventLayout, h driver.Event) (driver.Context, uint64, driver.Result) {
	rd := newReader()
	var objBuf [layoutSearchWords]uint64
	obj := objBuf[:l.Words]
	id, linked, ok := rd.eventChain(uintptr(h), l, obj)
	ctx := driver.Context(obj[l.CtxAt])
	if !ok || !p.primaryContext(api, ctx) {
		return 0, 0, driver.ErrorInvalidHandle
	}
	if !linked { // alone in ctx: no other event lives there
		var r driver.Result
		driver.AroundWait(func() { _, r = api.EventCreate(ctx, driver.EventDisableTiming) })
		if r != driver.Success {
			return 0, 0, driver.ErrorInvalidHandle
		}
		if id, linked, ok = rd.eventChain(uintptr(h), l, obj); !ok || !linked || driver.Context(obj[l.CtxAt]) != ctx {
			return 0, 0, driver.ErrorInvalidHandle
		}
	}
	return ctx, id, driver.Success
}

// EventCheck reports whether h is a live event of an active primary context, and its
// context and identity: driver.Success, or ErrorInvalidHandle for anything else;
// ErrorNotSupported where the driver's layout could not be learned.
func (d *Driver) EventCheck(h driver.Event) (driver.Context, uint64, driver.Result) {
	if !driver.PointerLike(uint64(h)) {
		return 0, 0, driver.ErrorInvalidHandle
	}
	eventLayoutLearning.Do(func() { d.learn(func() { evLayout = learnEventLayout(d) }) })
	if !evLayout.OK {
		return 0, 0, driver.ErrorNotSupported
	}
	return events.check(d, &evLayout, h)
}

// EventMemory is the learned event layout, in the brk heap as StreamMemory's is; not OK
// until a check has learned it, or where none was found.
func (*Driver) EventMemory() driver.EventMemory {
	if !eventLayoutLearning.Done() || !evLayout.OK {
		return driver.EventMemory{}
	}
	m := driver.EventMemory(evLayout)
	m.Lo, m.OK = heapStart()
	return m
}
