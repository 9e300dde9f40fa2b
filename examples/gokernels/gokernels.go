// Package gokernels is an example of your own Go package of GPU kernels, exported to Python
// with gopy next to streambridge: a stream from PyTorch, CuPy or cuda.core goes in, and the
// kernel this package launches runs on it, in order with the framework's work before and
// after. docs/go-functions.md says how to build one like it into the wheel.
//
// From Python, call it through streambridge.go_function, which hands over a stream-like
// argument as its validated handle and an array (anything with __cuda_array_interface__ or
// DLPack) as the text [bridge.ParseArray] reads, after making the stream wait for the
// array's producer:
//
//	saxpy = streambridge.go_function(streambridge.ext.gokernels.Saxpy)
//	saxpy(torch.cuda.current_stream(), 2.0, x, y)  # y = 2*x + y, on torch's stream
//
// Each function returns its errors as they are: the native module classifies them
// ([bridge.DescribeForPython]), so Python sees
// streambridge's typed exceptions.
package gokernels

import (
	"fmt"
	"sync"

	"github.com/streambridge/streambridge/bridge"
	"github.com/streambridge/streambridge/streams"
)

const source = `
extern "C" __global__ void saxpy(float a, const float *x, float *y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
`

// Saxpy computes y = a*x + y for two float32 arrays of one length on the stream: any
// framework's CUstream, validated before the driver sees it, on the arrays' device. It
// returns once the kernel is enqueued; work enqueued on the stream after it sees y.
func Saxpy(stream uint64, a float32, x, y string) error {
	b, err := bridge.Default()
	if err != nil {
		return err
	}
	return saxpy(b, stream, a, x, y)
}

// Describe says what reached Go: the stream's handle and device, and the array's pointer,
// dtype, shape and strides, as [bridge.Array] holds them.
func Describe(stream uint64, x string) (string, error) {
	b, err := bridge.Default()
	if err != nil {
		return "", err
	}
	s, err := b.Stream(uintptr(stream), bridge.Options{})
	if err != nil {
		return "", err
	}
	defer s.Close()
	a, err := bridge.ParseArray(x)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("stream %#x on device %d; %d elements of %s at %#x on device %d, shape %v, strides %v",
		s.Handle(), s.Device().Ordinal(), a.Len(), a.DType, uint64(a.Ptr), a.Device, a.Shape, a.Strides), nil
}

func saxpy(b *bridge.Bridge, stream uint64, a float32, x, y string) error {
	s, err := b.Stream(uintptr(stream), bridge.Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	xs, err := bridge.ParseArray(x)
	if err != nil {
		return err
	}
	ys, err := bridge.ParseArray(y)
	if err != nil {
		return err
	}
	if err := xs.Expect("<f4", s, false); err != nil {
		return fmt.Errorf("saxpy x: %w", err)
	}
	if err := ys.Expect("<f4", s, true); err != nil {
		return fmt.Errorf("saxpy y: %w", err)
	}
	n := ys.Len()
	if xs.Len() != n {
		return fmt.Errorf("saxpy: x has %d elements, y %d: %w", xs.Len(), n, bridge.ErrValue)
	}
	if n == 0 {
		return nil
	}
	fn, err := kernel(b, s.Device().Ordinal())
	if err != nil {
		return err
	}
	const block = 256
	cfg := streams.LaunchConfig{Grid: streams.Dim3{X: uint32((n + block - 1) / block)}, Block: streams.Dim3{X: block}}
	args := new(streams.Args).Float32(a).Pointer(xs.Ptr).Pointer(ys.Ptr).Int64(int64(n))
	return fn.Launch(s, cfg, args)
}

// The saxpy kernel of each device, compiled with NVRTC on first use and loaded into its
// primary context (which the bridge holds for the process, and which PyTorch and CuPy use
// too).
var (
	kernelsMu sync.Mutex
	kernels   = map[int]*streams.Function{}
)

func kernel(b *bridge.Bridge, device int) (*streams.Function, error) {
	kernelsMu.Lock()
	defer kernelsMu.Unlock()
	if f := kernels[device]; f != nil {
		return f, nil
	}
	c, err := b.Context(device)
	if err != nil {
		return nil, err
	}
	m, err := c.Compile(source, streams.CompileOptions{})
	if err != nil {
		return nil, err
	}
	f, err := m.Function("saxpy")
	if err != nil {
		m.Close()
		return nil, err
	}
	kernels[device] = f
	return f, nil
}

// Tally counts one call under label: a Go host function, for streambridge's
// launch_host_func (and streambridge.jax.launch_host_func, in JAX's stream order), which
// calls fn(arg) on the driver's thread when the stream reaches it. It makes no CUDA call,
// as no host function may.
func Tally(label string) {
	talliesMu.Lock()
	defer talliesMu.Unlock()
	tallies[label]++
}

// Tallies says how many times Tally(label) has run.
func Tallies(label string) int {
	talliesMu.Lock()
	defer talliesMu.Unlock()
	return tallies[label]
}

var (
	talliesMu sync.Mutex
	tallies   = map[string]int{}
)
