package streams

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streambridge/streambridge/internal/cuda"
)

// What StreamMemory says lets plain loads tell a live stream from a destroyed one and from
// a new stream at its address, on both drivers: the Python core verifies borrowed streams
// so before each use.
func TestStreamMemoryTellsALiveStreamFromADestroyedOne(t *testing.T) {
	needsLearnedLayout(t)
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		s, err := c.NewStream(StreamOptions{NonBlocking: true})
		require.NoError(t, err)
		_, id, err := d.StreamIdentity(s.Handle()) // a check: the real driver's layout is learned by now
		require.NoError(t, err)
		m := d.api.StreamMemory()
		require.True(t, m.OK)
		require.Greater(t, m.Words, max(m.BackAt, m.CtxAt, m.IDAt))
		h := s.Handle()
		assert.GreaterOrEqual(t, h, m.Lo, "the block lies where the driver says")
		assert.True(t, m.Hi == 0 || h < m.Hi, "the block lies where the driver says")

		// chain reads what a check reads: the object's back-pointer and identity, or ok false
		// where the block's first word no longer leads to readable memory.
		var ctx uint64
		chain := func() (back, ident uint64, ok bool) {
			head, ok := cuda.ReadWords(h, 1)
			if !ok {
				return 0, 0, false
			}
			obj, ok := cuda.ReadWords(uintptr(head[0]), m.Words)
			if !ok {
				return 0, 0, false
			}
			ctx = obj[m.CtxAt]
			return obj[m.BackAt], obj[m.IDAt], true
		}
		back, got, ok := chain()
		require.True(t, ok)
		assert.EqualValues(t, h, back, "the object names its handle")
		assert.EqualValues(t, c.Handle(), ctx, "its context")
		assert.Equal(t, id, got, "and its identity")

		require.NoError(t, s.Close())
		back, got, ok = chain()
		assert.False(t, ok && uint64(h) == back && got == id, "a destroyed stream's chain no longer holds")

		for range 8 { // a new stream at the old address (the allocator's choice) has another identity
			n := newStream(t, c, StreamOptions{NonBlocking: true})
			if n.Handle() == h {
				back, got, ok = chain()
				require.True(t, ok)
				assert.EqualValues(t, h, back)
				assert.NotEqual(t, id, got, "the address names another stream")
			}
		}
	})
}
