package streams

import (
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSoftwareDriverRunsNoDeviceCode(t *testing.T) {
	c := primary(t, Sim(), 0)
	_, err := c.LoadModule(kernelsPTX)
	require.ErrorIs(t, err, ErrNotSupported)
	assert.Contains(t, err.Error(), "the software driver runs no device code")
}

func TestKernelArguments(t *testing.T) {
	d := realDriver(t)
	c := primary(t, d, 0)
	s := newStream(t, c, StreamOptions{NonBlocking: true})
	fill := testKernel(t, c, "fill")
	const n = 1000
	out, err := c.Alloc(n * 4)
	require.NoError(t, err)
	defer out.Close()
	args := new(Args).Pointer(out.Ptr()).Uint32(n).Float32(0.5).Float64(2.25).Int64(-7)
	require.Equal(t, 5, args.Len())
	require.NoError(t, fill.Launch(s, LaunchConfig{Grid: Dim3{X: (n + 255) / 256}, Block: Dim3{X: 256}}, args))
	got := make([]float32, n)
	require.NoError(t, s.Synchronize())
	require.NoError(t, CopyFromDevice(got, out))
	for i := range got {
		want := 0.5*float32(i-7) + 2.25
		if got[i] != want {
			require.Equal(t, want, got[i], "element %d", i)
		}
	}
}

// A slow kernel on one stream, then a kernel writing a buffer; a second stream waits on
// an event and copies the buffer out. Without the wait the copy would read it unwritten.
func TestKernelOrderingAcrossStreams(t *testing.T) {
	d := realDriver(t)
	c := primary(t, d, 0)
	producer := newStream(t, c, StreamOptions{NonBlocking: true})
	consumer := newStream(t, c, StreamOptions{NonBlocking: true})
	const n = 1 << 20
	buf, err := c.Alloc(n * 4)
	require.NoError(t, err)
	defer buf.Close()
	require.NoError(t, CopyToDevice(buf, make([]float32, n)))
	ready := newEvent(t, c, EventOptions{DisableTiming: true})

	slowWork(t, producer, 300*time.Millisecond)
	fill := testKernel(t, c, "fill")
	require.NoError(t, fill.Launch(producer, LaunchConfig{Grid: Dim3{X: n / 256}, Block: Dim3{X: 256}},
		new(Args).Pointer(buf.Ptr()).Uint32(n).Float32(1).Float64(1).Int64(0)))
	require.NoError(t, producer.Record(ready))
	require.NoError(t, consumer.WaitEvent(ready))
	got := make([]float32, n)
	require.NoError(t, CopyFromDeviceAsync(got, buf, consumer))
	require.NoError(t, consumer.Synchronize())
	for i := range got {
		if got[i] != float32(i)+1 {
			require.Equal(t, float32(i)+1, got[i], "element %d read before the producer wrote it", i)
		}
	}
}

func TestModuleErrors(t *testing.T) {
	d := realDriver(t)
	c := primary(t, d, 0)
	_, err := c.LoadModule([]byte(".version 7.0\n.target sm_70\nthis is not ptx"))
	require.Error(t, err)
	t.Logf("bad PTX: %v", err)

	path := filepath.Join(t.TempDir(), "kernels.ptx")
	require.NoError(t, os.WriteFile(path, kernelsPTX, 0o600))
	m, err := c.LoadModuleFile(path)
	require.NoError(t, err)
	_, err = m.Function("no_such_kernel")
	assert.ErrorIs(t, err, ErrNotFound)
	empty, err := m.Function("empty")
	require.NoError(t, err)
	simStream := newStream(t, primary(t, Sim(), 0), StreamOptions{})
	assert.ErrorIs(t, empty.Launch(simStream, LaunchConfig{}, nil), ErrWrongDriver)
	var nilStream *Stream
	assert.ErrorIs(t, empty.Launch(nilStream, LaunchConfig{}, nil), ErrNil)
	require.NoError(t, m.Close())
	require.NoError(t, m.Close())
	_, err = m.Function("empty")
	assert.ErrorIs(t, err, ErrClosed)
}

// The paths the issue asks to be free of allocation, measured on the real driver.
func TestHotPathsDoNotAllocate(t *testing.T) {
	d := realDriver(t)
	c := primary(t, d, 0)
	a := newStream(t, c, StreamOptions{NonBlocking: true})
	b := newStream(t, c, StreamOptions{NonBlocking: true})
	e := newEvent(t, c, EventOptions{DisableTiming: true})
	empty := testKernel(t, c, "empty")
	var args Args
	var ran atomic.Int32
	hostFn := func() { ran.Store(1) }
	env := benchEnv{c: c, a: a, b: b, e: e, empty: empty} // the benchmarks' operations (bench_test.go)
	cases := []struct {
		name    string
		fn      func()
		inlined bool // holds only where the compiler inlines (needsInlining)
	}{
		{"record+wait", func() { _ = goRecordWait(env) }, false},
		{"wait stream", func() { _ = b.WaitStream(a) }, false},
		{"query", func() { _ = goQuery(env) }, false},
		// on goEventCreateClose's stack: NewEvent is inlined there, and nothing hands the event on
		{"event create+close", func() { _ = goEventCreateClose(env) }, true},
		{"launch", func() { _ = empty.Launch(a, LaunchConfig{}, args.Reset()) }, false},
		// enqueue and run to completion: the driver's thread, purego's callback and the
		// handle table included. AllocsPerRun sets GOMAXPROCS to 1, and the callback
		// needs a P to run Go code, so the wait yields it.
		{"host func", func() {
			ran.Store(0)
			_ = a.LaunchHostFunc(hostFn)
			for ran.Load() == 0 {
				runtime.Gosched()
			}
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.inlined {
				needsInlining(t)
			}
			tc.fn() // first use may create the stream's fence event
			allocs := testing.AllocsPerRun(1000, tc.fn)
			assert.Zero(t, allocs)
		})
	}
	require.NoError(t, a.Synchronize())
}

// imagesEnv names a folder holding kernels.cubin and kernels.fatbin, built from
// internal/kernels/kernels.ptx by scripts/gpu-check.sh with nvcc on the GPU machine.
const imagesEnv = "STREAMBRIDGE_TEST_IMAGES"

func TestLoadCubinAndFatbin(t *testing.T) {
	d := realDriver(t)
	dir := os.Getenv(imagesEnv)
	if dir == "" {
		if requireGPU {
			t.Fatalf("%s is not set: scripts/gpu-check.sh builds the images with nvcc", imagesEnv)
		}
		t.Skipf("SKIP: %s is not set (scripts/gpu-check.sh builds the images with nvcc)", imagesEnv)
	}
	c := primary(t, d, 0)
	s := newStream(t, c, StreamOptions{NonBlocking: true})
	for _, name := range []string{"kernels.cubin", "kernels.fatbin"} {
		t.Run(name, func(t *testing.T) {
			image, err := os.ReadFile(filepath.Join(dir, name))
			require.NoError(t, err)
			m, err := c.LoadModule(image)
			require.NoError(t, err)
			defer m.Close()
			fill, err := m.Function("fill")
			require.NoError(t, err)
			const n = 256
			out, err := c.Alloc(n * 4)
			require.NoError(t, err)
			defer out.Close()
			require.NoError(t, fill.Launch(s, LaunchConfig{Block: Dim3{X: n}},
				new(Args).Pointer(out.Ptr()).Uint32(n).Float32(3).Float64(-1).Int64(0)))
			got := make([]float32, n)
			require.NoError(t, CopyFromDeviceAsync(got, out, s))
			require.NoError(t, s.Synchronize())
			for i := range got {
				require.Equal(t, 3*float32(i)-1, got[i], "element %d", i)
			}
		})
	}
}

// A kernel launch captured into a graph, whoever captures, keeps the kernel's module: the
// graph and its executables run the kernel after the module's Close, which unloads it only
// once they are gone.
func TestAGraphKeepsTheModuleItsKernelsRun(t *testing.T) {
	d := realDriver(t)
	c := primary(t, d, 0)
	s := newStream(t, c, StreamOptions{NonBlocking: true})
	m, err := c.LoadModule(kernelsPTX)
	require.NoError(t, err)
	fill, err := m.Function("fill")
	require.NoError(t, err)
	const n = 256
	out := newBuffer(t, c, n*4)
	require.NoError(t, s.BeginCapture(CaptureRelaxed))
	require.NoError(t, fill.Launch(s, LaunchConfig{Grid: Dim3{X: 1}, Block: Dim3{X: n}},
		new(Args).Pointer(out.Ptr()).Uint32(n).Float32(1).Float64(3).Int64(0)))
	g, err := s.EndCapture()
	require.NoError(t, err)
	require.NoError(t, m.Close())
	require.ErrorIs(t, fill.Launch(s, LaunchConfig{}, new(Args)), ErrClosed)
	x, err := g.Instantiate()
	require.NoError(t, err)
	require.NoError(t, x.Launch(s))
	require.NoError(t, s.Synchronize())
	got := make([]float32, n)
	require.NoError(t, CopyFromDevice(got, out))
	assert.Equal(t, float32(n-1)+3, got[n-1])
	assert.Zero(t, m.uses.word.Load()&usesDestroyed, "the graph keeps the module")
	require.NoError(t, g.Close())
	require.NoError(t, x.Close())
	assert.Eventually(t, func() bool { return m.uses.word.Load()&usesDestroyed != 0 }, 10*time.Second, time.Millisecond,
		"the module is unloaded once the graph and its executable are gone")
}
