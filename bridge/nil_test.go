package bridge

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streambridge/streambridge/streams"
)

// A nil Bridge, one made by New(nil) and a zero one: every method returns streams.ErrNil
// (or nothing), none panics; Array.Expect without a stream likewise.
func TestNilBridgesGetErrorsNotPanics(t *testing.T) {
	for name, b := range map[string]*Bridge{"nil": nil, "New(nil)": New(nil), "zero": {}} {
		t.Run(name, func(t *testing.T) {
			_, err := b.Stream(0x1000, Options{})
			assert.ErrorIs(t, err, streams.ErrNil)
			_, _, err = b.Identity(0x1000, Options{})
			assert.ErrorIs(t, err, streams.ErrNil)
			_, err = b.Context(0)
			assert.ErrorIs(t, err, streams.ErrNil)
			assert.ErrorIs(t, b.Order(nil, nil), streams.ErrNil)
			assert.ErrorIs(t, b.Close(), streams.ErrNil)
			assert.NotPanics(t, func() { b.Driver() })
		})
	}
	a, err := ParseArray("array device=0 ptr=0x7f2a40000000 dtype=<f4 shape=4 strides=4 readonly=false")
	require.NoError(t, err)
	assert.ErrorIs(t, a.Expect(a.DType, nil, false), streams.ErrNil)
}
