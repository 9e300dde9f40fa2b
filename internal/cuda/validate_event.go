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
// to the event object, which holds its context, its identity (a counter the driver gives
// each event it creates: a new event at a freed event's address has another), and the
// events made after and before it in the same context (a doubly linked list per context).
// On driver 580 those are words 0, 3, 1 and 2. A live event is in its context's list: a
// neighbour points back to it. A destroyed one is out of the list and its memory freed
// (the allocator overwrites its first two words). A stream handle, or any other pointer,
// names no primary context at the context's word, or has no neighbour pointing back.
//
// An event alone in its context has no neighbour: so before it reads a candidate the check
// makes sure the candidate's primary context holds an event it keeps (a sentinel, one per
// primary context, made again after a reset destroyed it); every other live event of the
// context then has a neighbour.

type eventLayout struct {
	ok                          bool
	ctxAt, idAt, nextAt, prevAt int
	words                       int
}

var (
	eventLayoutOnce    sync.Once
	evLayout           eventLayout
	eventLayoutLearned atomic.Bool

	// The active primary contexts seen: a candidate's context must be one. Refreshed when
	// a candidate names one not among them. Read with no lock; replaced whole under
	// primariesMu, which also guards sentinels (one kept event per primary context seen).
	primariesMu sync.Mutex
	primaries   atomic.Pointer[map[driver.Context]bool]
	sentinels   = map[driver.Context]sentinel{}
)

// sentinel is the event the check keeps in a primary context, and its identity.
type sentinel struct {
	event driver.Event
	id    uint64
}

// learnEventLayout creates three events in device 0's primary context, one after another,
// and finds the words that hold the context, the list links and the identity (increasing
// from one event to the next).
func learnEventLayout(api driver.API) eventLayout {
	ctx, done, ok := device0(api)
	if !ok {
		return eventLayout{}
	}
	defer done()
	var evs [3]driver.Event
	var objs [3][]uint64
	for i := range evs {
		e, r := api.EventCreate(ctx, driver.EventDisableTiming)
		if r != driver.Success {
			return eventLayout{}
		}
		defer api.EventDestroy(e)
		evs[i] = e
	}
	for i, e := range evs { // read once all three are made: each links to the next
		objs[i] = make([]uint64, layoutSearchWords)
		if !(reader{}).peek(uintptr(e), objs[i]) { // known good: process_vm_readv will do
			return eventLayout{}
		}
	}
	a, b, c := objs[0], objs[1], objs[2]
	l := eventLayout{ctxAt: -1, idAt: -1, nextAt: -1, prevAt: -1}
	for i := range layoutSearchWords {
		switch {
		case l.ctxAt < 0 && a[i] == uint64(ctx) && b[i] == uint64(ctx) && c[i] == uint64(ctx):
			l.ctxAt = i
		case l.nextAt < 0 && a[i] == uint64(evs[1]) && b[i] == uint64(evs[2]):
			l.nextAt = i
		case l.prevAt < 0 && b[i] == uint64(evs[0]) && c[i] == uint64(evs[1]):
			l.prevAt = i
		case l.idAt < 0 && 0 < a[i] && a[i] < b[i] && b[i] < c[i] && c[i]-a[i] < 64:
			l.idAt = i // a counter: events made meanwhile by other threads may be between
		}
	}
	if l.ctxAt < 0 || l.idAt < 0 || l.nextAt < 0 || l.prevAt < 0 {
		return eventLayout{}
	}
	l.words = max(l.ctxAt, l.idAt, l.nextAt, l.prevAt) + 1
	samples, ok := eventsMadeOtherWays(api, ctx)
	defer func() {
		for _, s := range samples {
			api.EventDestroy(s.e)
		}
	}()
	if !ok || !l.holds(samples) {
		return eventLayout{} // learned from too few: nothing is proven rather than garbage accepted
	}
	l.ok = true
	return l
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

// holds reports whether l reads every sample right: its context at l.ctxAt, linked into
// its context's list (a neighbour points back), and an identity of its own.
func (l *eventLayout) holds(samples []eventSample) bool {
	obj := make([]uint64, l.words)
	ids := map[uint64]bool{}
	for _, s := range samples {
		linked, ok := (reader{}).eventChain(uintptr(s.e), l, obj) // known good: process_vm_readv will do
		if !ok || !linked || driver.Context(obj[l.ctxAt]) != s.ctx || ids[obj[l.idAt]] {
			return false
		}
		ids[obj[l.idAt]] = true
	}
	return true
}

// eventChain reads a candidate event's object (the first len(obj) words) and, for each
// neighbour it names, whether that neighbour points back to it; one fault-protected
// region. linked: some neighbour points back; ok false: unreadable, or a neighbour that
// does not point back.
func (r reader) eventChain(h uintptr, l *eventLayout, obj []uint64) (linked, ok bool) {
	if r.loads {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer unfault(&ok)
	}
	if !r.read(h, obj) {
		return false, false
	}
	var back [1]uint64
	for _, n := range [2]struct{ at, backAt int }{{l.nextAt, l.prevAt}, {l.prevAt, l.nextAt}} {
		next := uintptr(obj[n.at])
		if next == 0 {
			continue
		}
		if !r.read(next+uintptr(n.backAt)*8, back[:]) || uintptr(back[0]) != h {
			return false, false
		}
		linked = true
	}
	return linked, true
}

// primaryContext reports whether ctx is an active primary context, learning them again
// when it is not among those seen.
func (d *Driver) primaryContext(ctx driver.Context) bool {
	if known := primaries.Load(); known != nil && (*known)[ctx] {
		return true
	}
	primariesMu.Lock()
	defer primariesMu.Unlock()
	if known := primaries.Load(); known != nil && (*known)[ctx] {
		return true
	}
	found := map[driver.Context]bool{}
	eachActivePrimary(d, func(c driver.Context) { found[c] = true })
	primaries.Store(&found)
	return found[ctx]
}

// keepSentinel makes sure ctx, an active primary context, holds the sentinel: the one kept
// there, if its memory still holds its context and identity, else a new one.
func (d *Driver) keepSentinel(ctx driver.Context) {
	primariesMu.Lock()
	defer primariesMu.Unlock()
	obj := make([]uint64, evLayout.words)
	if s, ok := sentinels[ctx]; ok && newReader().peek(uintptr(s.event), obj) &&
		driver.Context(obj[evLayout.ctxAt]) == ctx && obj[evLayout.idAt] == s.id {
		return
	}
	e, r := d.EventCreate(ctx, driver.EventDisableTiming)
	if r == driver.Success && newReader().peek(uintptr(e), obj) {
		sentinels[ctx] = sentinel{e, obj[evLayout.idAt]}
	}
}

// EventCheck reports whether h is a live event of an active primary context, and its
// context and identity: driver.Success, or ErrorInvalidHandle for anything else;
// ErrorNotSupported where the driver's layout could not be learned.
func (d *Driver) EventCheck(h driver.Event) (driver.Context, uint64, driver.Result) {
	if uintptr(h) < 4096 || uintptr(h)%8 != 0 || uint64(h) >= 1<<47 {
		return 0, 0, driver.ErrorInvalidHandle
	}
	eventLayoutOnce.Do(func() { d.learn(func() { evLayout = learnEventLayout(d) }); eventLayoutLearned.Store(true) })
	if !evLayout.ok {
		return 0, 0, driver.ErrorNotSupported
	}
	// The context first, so that its sentinel exists before the links are read.
	rd := newReader()
	var ctx [1]uint64
	if !rd.peek(uintptr(h)+uintptr(evLayout.ctxAt)*8, ctx[:]) || !d.primaryContext(driver.Context(ctx[0])) {
		return 0, 0, driver.ErrorInvalidHandle
	}
	d.keepSentinel(driver.Context(ctx[0]))
	var objBuf [layoutSearchWords]uint64
	obj := objBuf[:evLayout.words]
	if linked, ok := rd.eventChain(uintptr(h), &evLayout, obj); !ok || !linked || obj[evLayout.ctxAt] != ctx[0] {
		return 0, 0, driver.ErrorInvalidHandle
	}
	return driver.Context(ctx[0]), obj[evLayout.idAt], driver.Success
}

// EventMemory is the learned event layout, in the brk heap as StreamMemory's is; not OK
// until a check has learned it, or where none was found.
func (*Driver) EventMemory() driver.EventMemory {
	if !eventLayoutLearned.Load() || !evLayout.ok {
		return driver.EventMemory{}
	}
	start, ok := heapStart()
	return driver.EventMemory{CtxAt: evLayout.ctxAt, IDAt: evLayout.idAt, NextAt: evLayout.nextAt,
		PrevAt: evLayout.prevAt, Words: evLayout.words, Lo: start, OK: ok}
}
