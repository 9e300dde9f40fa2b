package cuda

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streambridge/streambridge/internal/driver"
	"github.com/streambridge/streambridge/internal/sim"
)

// The learner, run on the software driver in each of its layouts (other offsets, a level of
// indirection more to the object, the identity in another block), learns exactly the
// description that layout declares (driver.StreamMemory and EventMemory, which the C core
// reads by): one description, whichever side it comes from. On the layout that cannot be
// learned (a blocking stream keeps its identity elsewhere) the samples disagree and it
// learns nothing, as the driver declares. By what it learned, the check's chain proves a
// live stream of each kind and a live event, with its context and identity, and refuses a
// destroyed one.
func TestTheLearnerOnEverySimLayout(t *testing.T) {
	require.Less(t, sim.LearnableLayouts(), sim.Layouts(), "a layout that cannot be learned is among them")
	for n := range sim.Layouts() {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			t.Setenv(sim.LayoutSetting, strconv.Itoa(n))
			t.Setenv(driver.LayoutSetting, "")
			d := sim.New()
			l, el := learnStreamLayout(d), learnEventLayout(d)
			m, em := d.StreamMemory(), d.EventMemory()
			if n >= sim.LearnableLayouts() {
				assert.False(t, m.OK, "the driver declares no layout")
				assert.False(t, l.OK, "the learner trusts none: a blocking stream reads wrong by what non-blocking ones show")
				return
			}
			require.True(t, m.OK)
			require.True(t, l.OK, "layout %d learned", n)
			learned := driver.StreamMemory(l)
			learned.Lo, learned.Hi = m.Lo, m.Hi
			assert.Equal(t, m, learned, "the streams' description")
			require.True(t, el.OK)
			learnedEvents := driver.EventMemory(el)
			learnedEvents.Lo, learnedEvents.Hi = em.Lo, em.Hi
			assert.Equal(t, em, learnedEvents, "the events' description")

			ctx, done, ok := device0(d)
			require.True(t, ok)
			defer done()
			for _, flags := range []uint32{0, driver.StreamNonBlocking} {
				s, r := d.StreamCreateWithPriority(ctx, flags, 0)
				require.Equal(t, driver.Success, r)
				id, r := d.StreamGetId(s)
				require.Equal(t, driver.Success, r)
				obj := make([]uint64, l.Words)
				for name, rd := range map[string]reader{"process_vm_readv": {}, "as a check reads": newReader()} {
					c, got, ok := rd.streamChain(uintptr(s), &l, obj, nil) // the driver's contexts are no memory here
					require.True(t, ok, "%s, flags %d", name, flags)
					assert.Equal(t, uintptr(ctx), c, name)
					assert.Equal(t, id, got, name)
				}
				require.Equal(t, driver.Success, d.StreamDestroy(s))
				_, _, ok = (reader{}).streamChain(uintptr(s), &l, obj, nil)
				assert.False(t, ok, "a destroyed stream's chain no longer leads back to it")
			}

			// Events, by what was learned: two live ones, each the other's neighbour, with
			// their context and identities of their own; a destroyed one out of the list; a
			// new event at its address (the slot freed last is taken first) with another.
			var evs [2]driver.Event
			for i := range evs {
				e, r := d.EventCreate(ctx, driver.EventDisableTiming)
				require.Equal(t, driver.Success, r)
				evs[i] = e
			}
			obj := make([]uint64, el.Words)
			var ids [2]uint64
			for i, e := range evs {
				for name, rd := range map[string]reader{"process_vm_readv": {}, "as a check reads": newReader()} {
					id, linked, ok := rd.eventChain(uintptr(e), &el, obj)
					require.True(t, ok && linked, "%s, event %d", name, i)
					assert.Equal(t, uint64(ctx), obj[el.CtxAt], name)
					ids[i] = id
				}
			}
			assert.NotEqual(t, ids[0], ids[1])
			require.Equal(t, driver.Success, d.EventDestroy(evs[1]))
			_, linked, ok := (reader{}).eventChain(uintptr(evs[1]), &el, obj)
			assert.False(t, ok && linked, "a destroyed event is in no list")
			again, r := d.EventCreate(ctx, driver.EventDisableTiming)
			require.Equal(t, driver.Success, r)
			require.Equal(t, evs[1], again, "the freed slot is taken again")
			id, linked, ok := (reader{}).eventChain(uintptr(again), &el, obj)
			require.True(t, ok && linked)
			assert.NotEqual(t, ids[1], id, "a new event at a destroyed one's address has another identity")
			for _, e := range []driver.Event{evs[0], again} {
				require.Equal(t, driver.Success, d.EventDestroy(e))
			}
		})
	}
}

// streamWorld is a software driver of one layout with live and destroyed streams of both
// kinds in its stream memory, and the layout the learner learned there.
type streamWorld struct {
	l    streamLayout
	m    driver.StreamMemory
	ctx  uintptr // the one context a check knows here: the stand-in of its primary contexts
	live map[uintptr]liveStream
	d    *sim.Driver // kept: its memory is what is read
}

type liveStream struct {
	ctx uintptr
	id  uint64
}

func newStreamWorld(t *testing.T, layout int) *streamWorld {
	t.Setenv(sim.LayoutSetting, strconv.Itoa(layout))
	d := sim.New()
	w := &streamWorld{l: learnStreamLayout(d), live: map[uintptr]liveStream{}, d: d}
	require.True(t, w.l.OK)
	ctx, _, ok := device0(d) // retained for the test's length
	require.True(t, ok)
	w.ctx = uintptr(ctx)
	for i := range 24 {
		s, r := d.StreamCreateWithPriority(ctx, uint32(i%2)*driver.StreamNonBlocking, 0)
		require.Equal(t, driver.Success, r)
		if i%3 == 0 {
			require.Equal(t, driver.Success, d.StreamDestroy(s))
			continue
		}
		id, _ := d.StreamGetId(s)
		w.live[uintptr(s)] = liveStream{uintptr(ctx), id}
	}
	w.m = d.StreamMemory()
	return w
}

// reads checks that h is accepted as a check accepts a stream (its chain leads back to it,
// from a context the check knows) exactly where it is a live stream's handle, and then
// reads as that stream; it reports whether h is one.
func (w *streamWorld) reads(t *testing.T, h uintptr) bool {
	ctx, id, ok := (reader{}).streamChain(h, &w.l, make([]uint64, w.l.Words), nil)
	ok = ok && ctx == w.ctx
	want, live := w.live[h]
	if !live {
		assert.False(t, ok, "%#x, no live stream's handle, reads as one", h)
		return false
	}
	assert.True(t, ok, "a live stream's handle %#x", h)
	assert.Equal(t, want, liveStream{ctx, id}, "%#x", h)
	return true
}

// By what the learner learned on each software layout, no word's address in or around the
// driver's stream memory but a live stream's handle reads as a stream as a check takes one,
// and a live one reads as itself, its context and identity: whatever the layout (a level of
// indirection more, the identity elsewhere), what was learned never turns a garbage or
// freed handle into an accepted one. The context is part of the proof: where an object
// keeps its handle at word 0 (layout 1), its own address leads back to itself through its
// block (found by FuzzOnlyLiveStreamsReadRight), and only the context it then names, no
// context's, refuses it, and StreamCheck asks the driver about no other context there
// (streamLayout.ambiguous).
func TestOnlyLiveStreamsReadRight(t *testing.T) {
	for layout := range sim.LearnableLayouts() {
		t.Run(strconv.Itoa(layout), func(t *testing.T) {
			w := newStreamWorld(t, layout)
			// Exactly on an ambiguous layout, a live stream's object reads as a stream by its chain.
			for h := range w.live {
				obj, _ := ReadWords(h, 1)
				if w.l.ObjVia >= 0 {
					obj, _ = ReadWords(uintptr(obj[0])+uintptr(w.l.ObjVia)*8, 1)
				}
				_, _, chained := (reader{}).streamChain(uintptr(obj[0]), &w.l, make([]uint64, w.l.Words), nil)
				assert.Equal(t, w.l.ambiguous(), chained, "the object of %#x", h)
			}
			live := 0
			for h := w.m.Lo - 4096; h < w.m.Lo+64<<10; h += 8 { // the first slots, the streams' among them
				if w.reads(t, h) {
					live++
				}
			}
			assert.Equal(t, len(w.live), live, "every live stream met")
		})
	}
}

// TestOnlyLiveEventsReadRight is TestOnlyLiveStreamsReadRight for events: by what the
// learner learned on each software layout, no word's address in or around the driver's
// event memory but a live event's handle reads as a linked event of the context (as
// EventCheck takes one), and a live one reads as itself, with the context and identity the
// software driver keeps for it. Where an event's object is a level further (layout 3), an
// address whose word ObjVia points to a live object (a neighbour's link does) would chain
// to that object: the object's word naming its handle refuses it.
func TestOnlyLiveEventsReadRight(t *testing.T) {
	for layout := range sim.LearnableLayouts() {
		t.Run(strconv.Itoa(layout), func(t *testing.T) {
			t.Setenv(sim.LayoutSetting, strconv.Itoa(layout))
			d := sim.New()
			l := learnEventLayout(d)
			require.True(t, l.OK)
			ctx, _, ok := device0(d) // retained for the test's length
			require.True(t, ok)
			live := map[uintptr]bool{}
			for i := range 24 {
				e, r := d.EventCreate(ctx, driver.EventDisableTiming)
				require.Equal(t, driver.Success, r)
				if i%3 == 0 {
					require.Equal(t, driver.Success, d.EventDestroy(e))
					continue
				}
				live[uintptr(e)] = true
			}
			m, obj, met := d.EventMemory(), make([]uint64, l.Words), 0
			for h := m.Lo - 4096; h < m.Lo+64<<10; h += 8 { // the first slots, the events' among them
				id, linked, ok := (reader{}).eventChain(h, &l, obj)
				ok = ok && linked && driver.Context(obj[l.CtxAt]) == ctx
				if !live[h] {
					assert.False(t, ok, "%#x, no live event's handle, reads as one", h)
					continue
				}
				met++
				c, want, r := d.EventCheck(driver.Event(h))
				require.Equal(t, driver.Success, r)
				assert.True(t, ok, "a live event's handle %#x", h)
				assert.Equal(t, [2]uint64{uint64(c), want}, [2]uint64{obj[l.CtxAt], id}, "%#x", h)
			}
			assert.Equal(t, len(live), met, "every live event met")
		})
	}
}

// FuzzOnlyLiveStreamsReadRight is TestOnlyLiveStreamsReadRight at any word of the stream
// memory and around it. A longer run than the seeds' (go test runs those):
//
//	go test -run '^$' -fuzz FuzzOnlyLiveStreamsReadRight -fuzztime 2m ./internal/cuda
func FuzzOnlyLiveStreamsReadRight(f *testing.F) {
	for layout := range sim.LearnableLayouts() {
		for _, at := range []uint32{0, 512, 528, 546, 1 << 20} {
			f.Add(uint8(layout), at)
		}
	}
	worlds := map[int]*streamWorld{}
	f.Fuzz(func(t *testing.T, layout uint8, at uint32) {
		n := int(layout) % sim.LearnableLayouts()
		if worlds[n] == nil {
			worlds[n] = newStreamWorld(t, n)
		}
		w := worlds[n]
		w.reads(t, w.m.Lo-4096+uintptr(at)*8%(w.m.Hi-w.m.Lo+8192))
	})
}

// The event check over the software driver: a live event alone in its context is proven,
// with a fresh sentinel made beside it, after the sentinel made for an earlier event is
// gone with every other event of the context (as when a context is released and made again
// at the same address, where a kept sentinel's memory can still read as alive: a live event
// was refused so on an H100 while the check trusted it).
func TestAnEventAloneInItsContextIsProvenWhateverTheKeptSentinelReads(t *testing.T) {
	d, l, ctx := eventsOnLayout0(t)
	require.Equal(t, -1, l.ObjVia, "the handle points to the object, as on driver 580")
	var p eventProver
	first, r := d.EventCreate(ctx, driver.EventDisableTiming)
	require.Equal(t, driver.Success, r)
	_, _, r = p.check(d, &l, first)
	require.Equal(t, driver.Success, r, "an event, with the sentinel made for it")
	obj := make([]uint64, l.Words)
	_, linked, ok := (reader{}).eventChain(uintptr(first), &l, obj)
	require.True(t, ok && linked)
	kept := driver.Event(obj[l.NextAt])
	require.NotZero(t, kept, "the sentinel made after it")
	for _, e := range []driver.Event{first, kept} {
		require.Equal(t, driver.Success, d.EventDestroy(e))
	}

	alone, r := d.EventCreate(ctx, driver.EventDisableTiming)
	require.Equal(t, driver.Success, r)
	got, id, r := p.check(d, &l, alone)
	require.Equal(t, driver.Success, r, "a live event alone in its context")
	wantCtx, wantID, _ := d.EventCheck(alone)
	assert.Equal(t, [2]uint64{uint64(wantCtx), wantID}, [2]uint64{uint64(got), id})
	_, linked, ok = (reader{}).eventChain(uintptr(alone), &l, obj)
	assert.True(t, ok && linked, "a fresh sentinel")
}

// eventsOnLayout0 is the software driver in its first layout, the event layout learned on
// it, and device 0's primary context, retained for the test's length.
func eventsOnLayout0(t *testing.T) (*sim.Driver, eventLayout, driver.Context) {
	t.Setenv(sim.LayoutSetting, "0")
	t.Setenv(driver.LayoutSetting, "")
	d := sim.New()
	l := learnEventLayout(d)
	require.True(t, l.OK)
	ctx, _, ok := device0(d)
	require.True(t, ok)
	return d, l, ctx
}
