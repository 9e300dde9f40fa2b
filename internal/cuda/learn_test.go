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
// live stream of each kind, with its context and identity, and refuses a destroyed one.
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
				assert.False(t, l.ok, "the learner trusts none: a blocking stream reads wrong by what non-blocking ones show")
				return
			}
			require.True(t, m.OK)
			require.True(t, l.ok, "layout %d learned", n)
			learned := l.memory(m.Lo, true)
			learned.Hi = m.Hi
			assert.Equal(t, m, learned, "the streams' description")
			require.True(t, el.ok)
			assert.Equal(t, [5]int{em.CtxAt, em.IDAt, em.NextAt, em.PrevAt, em.Words},
				[5]int{el.ctxAt, el.idAt, el.nextAt, el.prevAt, el.words}, "the events' description")

			ctx, done, ok := device0(d)
			require.True(t, ok)
			defer done()
			for _, flags := range []uint32{0, driver.StreamNonBlocking} {
				s, r := d.StreamCreateWithPriority(ctx, flags, 0)
				require.Equal(t, driver.Success, r)
				id, r := d.StreamGetId(s)
				require.Equal(t, driver.Success, r)
				obj := make([]uint64, l.objWords)
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
		})
	}
}

// FuzzOnlyLiveStreamsReadRight: by the layout the learner learned on a software layout, no
// address in or around the driver's stream memory but a live stream's handle reads as a
// stream as a check takes one (the chain leading back to it, from a context the check
// knows), and a live one reads as itself, its context and identity: whatever the layout (a
// level of indirection more, the identity elsewhere), what was learned never turns a
// garbage or freed handle into an accepted one. The context is part of the proof: where an
// object keeps its handle at word 0, its own address leads back to itself through its
// block (found by this fuzz), and only the context it then names, no context's, refuses
// it. The seeds run with go test; a longer run:
//
//	go test -run '^$' -fuzz FuzzOnlyLiveStreamsReadRight -fuzztime 2m ./internal/cuda
func FuzzOnlyLiveStreamsReadRight(f *testing.F) {
	for layout := range sim.LearnableLayouts() {
		for _, at := range []uint32{0, 1, 2, 3, 6, 50, 51, 52, 99, 100, 101, 102, 1000} {
			f.Add(uint8(layout), at)
		}
		for slot := range uint32(40) { // every word of the first slots, the live streams' handles among them
			for word := range uint32(50) {
				f.Add(uint8(layout), 512+slot*50+word)
			}
		}
	}
	type liveStream struct {
		ctx uintptr
		id  uint64
	}
	type world struct {
		l      streamLayout
		m      driver.StreamMemory
		ctx    uintptr // the one context the check knows here: its primary contexts' stand-in
		live   map[uintptr]liveStream
		keepUp *sim.Driver
	}
	worlds := map[int]*world{}
	made := func(t *testing.T, layout int) *world {
		if w := worlds[layout]; w != nil {
			return w
		}
		t.Setenv(sim.LayoutSetting, strconv.Itoa(layout))
		d := sim.New()
		w := &world{l: learnStreamLayout(d), live: map[uintptr]liveStream{}, keepUp: d}
		require.True(t, w.l.ok)
		ctx, _, ok := device0(d) // retained for the fuzz run's length
		require.True(t, ok)
		w.ctx = uintptr(ctx)
		for i := range 24 { // live and destroyed streams, both kinds, in the slab
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
		worlds[layout] = w
		return w
	}
	f.Fuzz(func(t *testing.T, layout uint8, at uint32) {
		w := made(t, int(layout)%sim.LearnableLayouts())
		h := w.m.Lo - 4096 + uintptr(at)*8%(w.m.Hi-w.m.Lo+8192) // words in and around the stream memory
		ctx, id, ok := (reader{}).streamChain(h, &w.l, make([]uint64, w.l.objWords), nil)
		ok = ok && ctx == w.ctx
		want, live := w.live[h]
		if !live {
			assert.False(t, ok, "%#x, no live stream's handle, reads as one (layout %d)", h, layout)
			return
		}
		assert.True(t, ok, "a live stream's handle %#x (layout %d)", h, layout)
		assert.Equal(t, want, liveStream{ctx, id})
	})
}
