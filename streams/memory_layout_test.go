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
		require.Greater(t, m.Words, max(m.BackAt, m.CtxAt))
		h := s.Handle()
		assert.GreaterOrEqual(t, h, m.Lo, "the block lies where the driver says")
		assert.True(t, m.Hi == 0 || h < m.Hi, "the block lies where the driver says")

		// chain reads what a check reads, by the description (cuda.StreamChain): ok false
		// where the chain no longer leads back to h.
		chain := func() (ctx uintptr, ident uint64, ok bool) { return cuda.StreamChain(h, m) }
		ctx, got, ok := chain()
		require.True(t, ok, "the object names its handle")
		assert.EqualValues(t, c.Handle(), ctx, "its context")
		assert.Equal(t, id, got, "and its identity")

		require.NoError(t, s.Close())
		_, got, ok = chain()
		assert.False(t, ok && got == id, "a destroyed stream's chain no longer holds")

		for range 8 { // a new stream at the old address (the allocator's choice) has another identity
			n := newStream(t, c, StreamOptions{NonBlocking: true})
			if n.Handle() == h {
				_, got, ok = chain()
				require.True(t, ok)
				assert.NotEqual(t, id, got, "the address names another stream")
			}
		}
	})
}
