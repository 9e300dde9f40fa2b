package streams

import (
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streambridge/streambridge/internal/driver"
	"github.com/streambridge/streambridge/internal/kernels"
)

// requireGPU is STREAMBRIDGE_REQUIRE_GPU=1: on the GPU machine a missing driver is a
// failure, not a skip.
var requireGPU = os.Getenv("STREAMBRIDGE_REQUIRE_GPU") == "1"

// eachDriver runs body once per driver: the software driver always, the real driver where
// libcuda loads. Without it the "cuda" subtest is skipped with the reason, or fails under
// STREAMBRIDGE_REQUIRE_GPU=1.
//
// Each run must leave every primary context unretained once its cleanups have run: a
// retain left behind keeps the context from resetting, so whichever test runs next would
// meet its objects (a wrapper left open made TestContextLivesUntilItsObjectsClose/cuda fail
// under one -shuffle seed on the H100).
func eachDriver(t *testing.T, body func(t *testing.T, d *Driver)) {
	t.Run("sim", func(t *testing.T) { leavesNoRetain(t, Sim()); body(t, Sim()) })
	t.Run("cuda", func(t *testing.T) { d := realDriver(t); leavesNoRetain(t, d); body(t, d) })
}

// leavesNoRetain checks, after t's other cleanups (it registers first, so runs last), that
// no device's primary context is active that was not before. A graph whose executable was closed with launches
// in flight releases its retain on another goroutine (see Graph.unref), so this waits a
// little for that.
func leavesNoRetain(t *testing.T, d *Driver) {
	n, err := d.DeviceCount()
	require.NoError(t, err)
	before := make([]bool, n) // a context a test before left retained is that test's fault
	for i := range n {
		dev, r := d.api.DeviceGet(i)
		require.Equal(t, driver.Success, r)
		before[i], r = d.api.DevicePrimaryCtxActive(dev)
		require.Equal(t, driver.Success, r)
	}
	t.Cleanup(func() {
		for i := range n {
			if before[i] {
				continue
			}
			dev, r := d.api.DeviceGet(i)
			require.Equal(t, driver.Success, r)
			active := true
			for wait := 0; active && wait < 2000; wait++ {
				if wait > 0 {
					time.Sleep(time.Millisecond)
				}
				active, r = d.api.DevicePrimaryCtxActive(dev)
				require.Equal(t, driver.Success, r)
			}
			assert.False(t, active, "the test left device %d's primary context retained", i)
		}
	})
}

// realDriver returns the CUDA driver or skips (fails under STREAMBRIDGE_REQUIRE_GPU=1).
func realDriver(t testing.TB) *Driver {
	t.Helper()
	d, err := loadCUDA() // the error without the hint for a user with no GPU
	if err != nil {
		if requireGPU {
			t.Fatalf("STREAMBRIDGE_REQUIRE_GPU=1 but the real driver is unusable: %v", err)
		}
		t.Skipf("SKIP: real CUDA driver not usable on this machine: %v", err)
	}
	return d
}

func primary(t testing.TB, d *Driver, ordinal int) *Context {
	t.Helper()
	dev, err := d.Device(ordinal)
	require.NoError(t, err)
	c, err := dev.PrimaryContext()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}

func newStream(t testing.TB, c *Context, opts StreamOptions) *Stream {
	t.Helper()
	s, err := c.NewStream(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// wrapStream borrows handle in c, closed when the test ends: an open wrapper holds c's
// retain, and a test that leaves one open keeps the context from resetting for the next.
func wrapStream(t testing.TB, c *Context, handle uintptr) *Stream {
	t.Helper()
	if handle > PerThreadStream {
		needsLearnedLayout(t) // a stream object's handle: only a learned layout proves it
	}
	s, err := c.WrapStream(handle)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func newEvent(t testing.TB, c *Context, opts EventOptions) *Event {
	t.Helper()
	e, err := c.NewEvent(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	return e
}

// mustEndCapture ends the capture going on on s and closes the graph it made, failing the
// test where either fails (endCapture, goroutine_test.go, is the lenient one, for a
// capture that may have ended).
func mustEndCapture(t testing.TB, s *Stream) {
	t.Helper()
	g, err := s.EndCapture()
	require.NoError(t, err)
	require.NoError(t, g.Close())
}

// hostFuncsBackTo waits until the host functions registered are as many as before: a
// graph's are freed by the destructor of a user object it holds, which the driver runs on a
// thread of its own, maybe after the call that destroyed the graph has returned.
func hostFuncsBackTo(t testing.TB, before int) {
	t.Helper()
	assert.Eventually(t, func() bool { return LiveHostFuncs() == before }, 5*time.Second, time.Millisecond,
		"host functions left registered: %d, before %d", LiveHostFuncs(), before)
}

// settledHostFuncs is how many host functions are registered once the frees an earlier
// test left to the driver's threads have run: the count, once it has not changed for 50 ms
// (5 s at most). A test that counts what it leaves starts from it.
func settledHostFuncs() int {
	n := LiveHostFuncs()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		m := LiveHostFuncs()
		if m == n {
			return n
		}
		n = m
	}
	return n
}

// needsInlining skips, saying so, where the compiler inlines nothing (-gcflags=-l, as a
// debugger's build has it): an event made and closed in one function stays on its stack only
// where NewEvent is inlined there. newProbe is that shape: a pointer made by an inlined call
// and kept nowhere does not allocate.
func needsInlining(t testing.TB) {
	t.Helper()
	if testing.AllocsPerRun(10, func() { *newProbe() = 1 }) != 0 {
		t.Skip("the compiler inlines nothing in this build (-gcflags=-l): an event is on the heap here, as any pointer a call returns")
	}
}

func newProbe() *int { return new(int) }

// gate blocks a stream until opened: a host function that waits on a channel. It is
// how these tests make a producer slow on either driver without a kernel.
type gate struct{ ch chan struct{} }

func blockStream(t testing.TB, s *Stream) *gate {
	t.Helper()
	g := &gate{ch: make(chan struct{})}
	require.NoError(t, s.LaunchHostFunc(func() { <-g.ch }))
	t.Cleanup(g.open)
	return g
}

func (g *gate) open() {
	select {
	case <-g.ch:
	default:
		close(g.ch)
	}
}

// journal records the order in which host functions ran.
type journal struct {
	mu      sync.Mutex
	entries []string
}

func (j *journal) add(s string) func() {
	return func() {
		j.mu.Lock()
		j.entries = append(j.entries, s)
		j.mu.Unlock()
	}
}

func (j *journal) get() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.entries...)
}

// settle gives queued work time to run if nothing holds it back.
func settle() { time.Sleep(50 * time.Millisecond) }

var kernelsPTX = kernels.PTX

// testKernel loads internal/kernels into c for this test and returns one of its
// kernels. Modules are not cached across tests: releasing a primary context's last retain
// resets it, which unloads its modules while the context handle stays the same.
func testKernel(t testing.TB, c *Context, name string) *Function {
	t.Helper()
	m, err := c.LoadModule(kernelsPTX)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	f, err := m.Function(name)
	require.NoError(t, err)
	return f
}

// slowWork occupies s for about d without holding the driver's host-function thread: a
// spinning kernel on the real driver, a sleeping host function on the software one (which
// has no other way to be slow).
func slowWork(t testing.TB, s *Stream, d time.Duration) {
	t.Helper()
	if s.Context().Driver().Name() == "sim" {
		require.NoError(t, s.LaunchHostFunc(func() { time.Sleep(d) }))
		return
	}
	spin := testKernel(t, s.Context(), "spin")
	require.NoError(t, spin.Launch(s, LaunchConfig{}, new(Args).Uint64(uint64(d.Nanoseconds()))))
}

// needsLearnedLayout skips t, saying so, where the driver's layout is not learned
// (STREAMBRIDGE_LAYOUT=unlearnable): t asserts what only a learned layout proves or reads.
func needsLearnedLayout(t testing.TB) {
	t.Helper()
	if never, _ := driver.Unlearnable(); never {
		t.Skip("SKIP: asserts what a learned stream layout proves; STREAMBRIDGE_LAYOUT=unlearnable here (that case: TestAnUnlearnableLayout)")
	}
}
