package bridge

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestArrayRoundTrips(t *testing.T) {
	for _, a := range []Array{
		{Ptr: 0x7f2a40000000, DType: "<f4", Shape: []int{2, 3}, Strides: []int{12, 4}, Device: 1},
		{Ptr: 0x10, DType: "|b1", Shape: []int{}, Strides: []int{}, Device: -1, ReadOnly: true},
		{Ptr: 0x20, DType: "bfloat16", Shape: []int{4, 1}, Strides: []int{2, 2}},
	} {
		got, err := ParseArray(a.String())
		require.NoError(t, err, a.String())
		assert.Equal(t, a, got)
	}
}

func TestArrayShape(t *testing.T) {
	a := Array{DType: "<f8", Shape: []int{2, 3}, Strides: []int{24, 8}}
	assert.Equal(t, 6, a.Len())
	assert.Equal(t, 8, a.ItemSize())
	assert.True(t, a.Contiguous())
	a.Strides = []int{8, 16} // Fortran order
	assert.False(t, a.Contiguous())
	assert.True(t, Array{DType: "<f4", Shape: []int{3, 1}, Strides: []int{4, 999}}.Contiguous(), "a dimension of 1 has any stride")
}

func TestParseArrayRefusesMalformedText(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"empty", "", "is not an array"},
		{"no header", "device=0 ptr=1", "is not an array"},
		{"missing ptr", "array device=0 dtype=<f4 shape=1 strides=4", "has no ptr"},
		{"repeated", "array device=0 device=1", "malformed or repeated"},
		{"no equals", "array device", "malformed or repeated"},
		{"unknown field", "array colour=blue", "unknown field"},
		{"bad pointer", "array device=0 ptr=xyz dtype=<f4 shape=1 strides=4", `"ptr=xyz"`},
		{"bad shape", "array device=0 ptr=1 dtype=<f4 shape=1,x strides=4", `"shape=1,x"`},
		{"strides disagree", "array device=0 ptr=1 dtype=<f4 shape=1,2 strides=4", "2 dimensions"},
		{"bad dtype", "array device=0 ptr=1 dtype=float shape=1 strides=4", "not the NumPy type string of a GPU scalar"},
		{"no such float", "array device=0 ptr=1 dtype=<f99999 shape=1 strides=4", `dtype "<f99999" is not`},
		{"no such kind", "array device=0 ptr=1 dtype=<x4 shape=1 strides=4", `dtype "<x4" is not`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseArray(tc.text)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
