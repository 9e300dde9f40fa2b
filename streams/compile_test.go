package streams

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// needNVRTC skips without libnvrtc (fails under STREAMBRIDGE_REQUIRE_GPU=1: the GPU
// machine has one).
func needNVRTC(t *testing.T) {
	t.Helper()
	if _, err := Compile("", CompileOptions{Arch: "sm_90", PTX: true}); errors.Is(err, ErrNoNVRTC) {
		if requireGPU {
			t.Fatalf("STREAMBRIDGE_REQUIRE_GPU=1 but NVRTC is unusable: %v", err)
		}
		t.Skipf("SKIP: no NVRTC on this machine: %v", err)
	}
}

const scaleSource = `
#include "offset.h"
template <typename T>
__global__ void scale(T *out, const T *in, T a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * in[i] + (T)(OFFSET + BIAS);
}
extern "C" __global__ void iota(float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (float)i;
}
`

var scaleOptions = CompileOptions{
	Headers:         map[string]string{"offset.h": "#define BIAS 0.5"},
	Defines:         map[string]string{"OFFSET": "1"},
	NameExpressions: []string{"scale<float>", "scale<double>"},
	Options:         []string{"-std=c++17"},
	Name:            "scale.cu",
}

func TestCompileToPTXAndCubin(t *testing.T) {
	needNVRTC(t)
	ptxOpts := scaleOptions
	ptxOpts.Arch, ptxOpts.PTX = "compute_90", true
	p, err := Compile(scaleSource, ptxOpts)
	require.NoError(t, err)
	assert.Contains(t, string(p.Image), ".entry")
	f, d := p.LoweredName("scale<float>"), p.LoweredName("scale<double>")
	assert.Regexp(t, `^_Z\d*scale`, f)
	assert.NotEqual(t, f, d, "two instantiations, two symbols")
	assert.Contains(t, string(p.Image), f)
	assert.Equal(t, "iota", p.LoweredName("iota"), "extern \"C\" names are their own")

	again, err := Compile(scaleSource, ptxOpts)
	require.NoError(t, err)
	assert.Same(t, p, again, "the same source and options come from the cache")

	cubinOpts := scaleOptions
	cubinOpts.Arch = "sm_90"
	c, err := Compile(scaleSource, cubinOpts)
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(c.Image, elfMagic), "a cubin is an ELF image")

	_, err = Compile(scaleSource, CompileOptions{Arch: "compute_90"})
	require.ErrorContains(t, err, "a cubin needs a real architecture")
	_, err = Compile(scaleSource, CompileOptions{})
	require.ErrorContains(t, err, "no target architecture")
}

func TestCompileErrorCarriesTheWholeLog(t *testing.T) {
	needNVRTC(t)
	_, err := Compile("__global__ void k() { int x = not_declared_anywhere; }\n", CompileOptions{Arch: "sm_90", Name: "broken.cu"})
	var ce *CompileError
	require.ErrorAs(t, err, &ce)
	assert.EqualValues(t, 6, ce.Result, "NVRTC_ERROR_COMPILATION")
	assert.Contains(t, ce.Log, "broken.cu")
	assert.Contains(t, ce.Log, "not_declared_anywhere")
	assert.Contains(t, err.Error(), ce.Log)
}

// A compiled template runs on a stream with the right results (the software driver, which
// runs no device code, refuses to load it, and says so).
func TestCompiledKernelsRun(t *testing.T) {
	needNVRTC(t)
	eachDriver(t, func(t *testing.T, d *Driver) {
		c := primary(t, d, 0)
		opts := scaleOptions // the architecture of c's device by default
		if d.Name() == "sim" {
			opts.Arch = "sm_90" // its devices have none (compute capability 0.0)
			_, err := c.Compile(scaleSource, opts)
			require.ErrorIs(t, err, ErrNotSupported)
			return
		}
		m, err := c.Compile(scaleSource, opts)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, m.Close()) })
		const n = 1000
		in, out := newBuffer(t, c, n*4), newBuffer(t, c, n*4)
		s := newStream(t, c, StreamOptions{NonBlocking: true})
		iota, err := m.Function("iota")
		require.NoError(t, err)
		scale, err := m.Function("scale<float>")
		require.NoError(t, err)
		cfg := LaunchConfig{Grid: Dim3{X: (n + 255) / 256}, Block: Dim3{X: 256}}
		require.NoError(t, iota.Launch(s, cfg, new(Args).Pointer(in.Ptr()).Int32(n)))
		require.NoError(t, scale.Launch(s, cfg, new(Args).Pointer(out.Ptr()).Pointer(in.Ptr()).Float32(3).Int32(n)))
		require.NoError(t, s.Synchronize())
		got := make([]float32, n)
		require.NoError(t, CopyFromDevice(got, out))
		for i, v := range got {
			require.Equal(t, float32(3*i)+1.5, v, "element %d", i)
		}
	})
}

func newBuffer(t *testing.T, c *Context, size uint64) *Buffer {
	t.Helper()
	b, err := c.Alloc(size)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	return b
}

// The software driver's devices have no architecture: compiling for one fails as not
// supported before NVRTC is asked, whether or not the machine has NVRTC.
func TestCompileForASoftwareDeviceIsNotSupported(t *testing.T) {
	c := primary(t, Sim(), 0)
	_, err := c.Compile(`extern "C" __global__ void k() {}`, CompileOptions{})
	require.ErrorIs(t, err, ErrNotSupported)
	assert.Contains(t, err.Error(), "runs no device code")
}
