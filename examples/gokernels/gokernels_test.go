package gokernels

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streambridge/streambridge/bridge"
	"github.com/streambridge/streambridge/internal/testdrivers"
	"github.com/streambridge/streambridge/streams"
)

// vector describes n float32s at b, as streambridge.go_function would hand them over.
func vector(b *streams.Buffer, device, n int) string {
	return bridge.Array{Ptr: b.Ptr(), DType: "<f4", Shape: []int{n}, Strides: []int{4}, Device: device}.String()
}

func TestSaxpyOnAForeignStream(t *testing.T) {
	testdrivers.Each(t, func(t *testing.T, d *streams.Driver) {
		b, err := bridge.New(d)
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		c := testdrivers.Primary(t, d, 0)
		theirs := testdrivers.Stream(t, c, streams.StreamOptions{NonBlocking: true}) // stands in for torch's
		const n = 10000
		xs, ys := make([]float32, n), make([]float32, n)
		for i := range xs {
			xs[i], ys[i] = float32(i), 1
		}
		x, err := c.Alloc(n * 4)
		require.NoError(t, err)
		t.Cleanup(func() { x.Close() })
		y, err := c.Alloc(n * 4)
		require.NoError(t, err)
		t.Cleanup(func() { y.Close() })
		require.NoError(t, streams.CopyToDevice(x, xs))
		require.NoError(t, streams.CopyToDevice(y, ys))

		err = saxpy(b, uint64(theirs.Handle()), 2, vector(x, 0, n), vector(y, 0, n))
		if d.Name() == "sim" { // the software driver runs no device code
			require.Error(t, err)
			assert.True(t, errors.Is(err, streams.ErrNotSupported) || errors.Is(err, streams.ErrNoNVRTC), "%v", err)
			return
		}
		require.NoError(t, err)
		require.NoError(t, streams.CopyFromDeviceAsync(ys, y, theirs)) // after the kernel, on its stream
		require.NoError(t, theirs.Synchronize())
		for i, v := range ys {
			require.Equal(t, float32(2*i+1), v, "element %d", i)
		}
	})
}

func TestSaxpyRefusesBadArguments(t *testing.T) {
	testdrivers.Each(t, func(t *testing.T, d *streams.Driver) {
		b, err := bridge.New(d)
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		c := testdrivers.Primary(t, d, 0)
		s := testdrivers.Stream(t, c, streams.StreamOptions{})
		buf, err := c.Alloc(64)
		require.NoError(t, err)
		t.Cleanup(func() { buf.Close() })
		good := vector(buf, 0, 16)
		ints := bridge.Array{Ptr: buf.Ptr(), DType: "<i4", Shape: []int{16}, Strides: []int{4}, Device: 0}.String()
		strided := bridge.Array{Ptr: buf.Ptr(), DType: "<f4", Shape: []int{8}, Strides: []int{8}, Device: 0}.String()
		readonly := bridge.Array{Ptr: buf.Ptr(), DType: "<f4", Shape: []int{16}, Strides: []int{4}, ReadOnly: true}.String()
		h := uint64(s.Handle())
		for _, tc := range []struct {
			name   string
			stream uint64
			x, y   string
			want   string
			is     error
		}{
			{"garbage stream", 0xdeadbeef, good, good, "not a live CUDA stream", streams.ErrInvalidHandle},
			{"not an array", h, "hello", good, "is not an array", nil},
			{"wrong dtype", h, ints, good, "array is <i4, not <f4", nil},
			{"strided", h, strided, good, "not C-contiguous", nil},
			{"read-only output", h, good, readonly, "read-only", nil},
			{"wrong device", h, good, vector(buf, 1, 16), "array is on device 1", nil},
			{"lengths differ", h, vector(buf, 0, 8), good, "x has 8 elements, y 16", bridge.ErrValue},
		} {
			t.Run(tc.name, func(t *testing.T) {
				err := saxpy(b, tc.stream, 1, tc.x, tc.y)
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.want)
				if tc.is != nil {
					assert.ErrorIs(t, err, tc.is)
				}
			})
		}
	})
}

func TestTallyCountsEachCallByLabel(t *testing.T) {
	before := Tallies("a")
	Tally("a")
	Tally("a")
	Tally("b")
	require.Equal(t, before+2, Tallies("a"))
	require.GreaterOrEqual(t, Tallies("b"), 1)
}
