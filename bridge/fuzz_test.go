package bridge

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzParseArray: any text is refused or read into an array that describes itself again
// (String, then ParseArray, gives it back), whose element count and byte size fit, and whose
// dimensions and device are not negative. The seeds run with go test; a longer run:
//
//	go test -run '^$' -fuzz FuzzParseArray -fuzztime 5m ./bridge
func FuzzParseArray(f *testing.F) {
	for _, seed := range []string{
		"array device=0 ptr=0x7f2a40000000 dtype=<f4 shape=2,3 strides=12,4 readonly=false",
		"array device=-1 ptr=0x1000 dtype=<f8 shape= strides= readonly=true",
		"array device=0 ptr=0x1000 dtype=bfloat16 shape=0,4294967296 strides=2,2",
		"array device=0 ptr=0x1000 dtype=<f4 shape=4294967296,4294967296 strides=4,4",
		"array device=0 ptr=0x1000 dtype=<f4 shape=-1 strides=4",
		"array device=0 ptr=0x1000 dtype=<c16 shape=3 strides=-16",
		"array",
		"",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		a, err := ParseArray(text)
		if err != nil {
			return
		}
		require.GreaterOrEqual(t, a.Device, -1)
		bytes := uint64(a.ItemSize())
		for _, d := range a.Shape {
			require.GreaterOrEqual(t, d, 0)
			if d > 0 {
				require.LessOrEqual(t, bytes, uint64(1<<63-1)/uint64(d), "element count overflows")
			}
			bytes *= uint64(d)
		}
		require.GreaterOrEqual(t, a.Len(), 0)
		again, err := ParseArray(a.String())
		require.NoError(t, err, "its own text form: %s", a.String())
		assert.Equal(t, a, again)
	})
}
