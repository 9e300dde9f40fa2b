package streams

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMemoryCopies(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		const n = 1 << 16
		b, err := c.Alloc(n * 4)
		require.NoError(t, err)
		defer func() { require.NoError(t, b.Close()) }()
		src := make([]int32, n)
		for i := range src {
			src[i] = int32(i*7 - 3)
		}
		require.NoError(t, CopyToDevice(b, src))
		got := make([]int32, n)
		require.NoError(t, CopyFromDevice(got, b))
		assert.Equal(t, src, got)

		// Asynchronous copies run in stream order, behind slow work.
		s := newStream(t, c, StreamOptions{NonBlocking: true})
		src2 := make([]int32, n)
		for i := range src2 {
			src2[i] = int32(-i)
		}
		got2 := make([]int32, n)
		slowWork(t, s, 50*time.Millisecond)
		require.NoError(t, CopyToDeviceAsync(b, src2, s))
		require.NoError(t, CopyFromDeviceAsync(got2, b, s))
		require.NoError(t, s.Synchronize())
		assert.Equal(t, src2, got2)

		require.Error(t, CopyToDevice(b, make([]int32, n+1)), "larger than the buffer")
	})
}
