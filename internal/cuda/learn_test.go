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
