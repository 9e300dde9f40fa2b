package bridge

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streambridge/streambridge/streams"
)

// New(nil) is an error; a nil Bridge and a zero one: every method returns streams.ErrNil
// (or nothing), none panics; Array.Expect without a stream likewise.
func TestNilBridgesGetErrorsNotPanics(t *testing.T) {
	none, err := New(nil)
	require.ErrorIs(t, err, streams.ErrNil)
	assert.Nil(t, none)
	assert.Contains(t, err.Error(), "bridge.New needs a driver")
	for name, b := range map[string]*Bridge{"nil": nil, "zero": {}} {
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

// After a first call failed for want of a driver, setting STREAMBRIDGE_DRIVER does not
// help in that process: the error says the setting is read once, what it was and is, and
// what to do. In a child process with no driver to load (STREAMBRIDGE_LIBCUDA names
// nothing), so that it runs on the GPU machine too.
func TestTheDriverSettingIsReadOnceAndTheErrorSaysSo(t *testing.T) {
	if os.Getenv("STREAMBRIDGE_TEST_SETTING_CHILD") == "1" {
		_, first := Default()
		require.ErrorIs(t, first, streams.ErrNoDriver)
		assert.NotContains(t, first.Error(), "read once")
		require.NoError(t, os.Setenv("STREAMBRIDGE_DRIVER", "sim"))
		_, second := Default()
		require.ErrorIs(t, second, streams.ErrNoDriver)
		assert.Contains(t, second.Error(), `read once, at the first call, and was "" then, "sim" now`)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestTheDriverSettingIsReadOnceAndTheErrorSaysSo$", "-test.v")
	cmd.Env = append(os.Environ(), "STREAMBRIDGE_TEST_SETTING_CHILD=1", "STREAMBRIDGE_DRIVER=", "STREAMBRIDGE_LIBCUDA=/nonexistent/libcuda.so.1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "--- PASS: TestTheDriverSettingIsReadOnceAndTheErrorSaysSo")
}

// Shapes whose element count overflows (to 0, once) and negative dimensions or devices are
// refused, not parsed into an array whose Len lies.
func TestParseArrayRefusesImpossibleShapes(t *testing.T) {
	for _, text := range []string{
		"array device=0 ptr=0x1000 dtype=<f4 shape=-1 strides=4",
		"array device=0 ptr=0x1000 dtype=<f4 shape=4,-2 strides=8,4",
		"array device=0 ptr=0x1000 dtype=<f4 shape=4294967296,4294967296 strides=4,4",
		"array device=0 ptr=0x1000 dtype=<f8 shape=2305843009213693952 strides=8",
		"array device=-5 ptr=0x1000 dtype=<f4 shape=4 strides=4",
	} {
		_, err := ParseArray(text)
		assert.Error(t, err, text)
	}
	a, err := ParseArray("array device=-1 ptr=0x1000 dtype=<f4 shape=0,4294967296 strides=4,4")
	require.NoError(t, err, "a 0-element array of any other extent is one")
	assert.Equal(t, 0, a.Len())
}
