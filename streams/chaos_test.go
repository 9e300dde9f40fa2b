package streams

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streambridge/streambridge/internal/driver"
)

// The chaos soak: eight goroutines make random calls, every public call of a stream, an
// event, a graph, an executable graph and a buffer, on four shared streams, four events,
// two graphs, two executables and two buffers, and close and remake each kind of object at
// random (one call in ten is a close), and on the real driver two kernels' launches and
// their modules' loads and closes (the software driver runs no device code). Captures in
// every mode are begun on any goroutine, ended by it or abandoned
// (one in five, left for the stream's Close to end), joined by other streams through waits
// on events recorded in them; host functions query, close or panic. Any typed error is
// accepted: the soak fails only on a crash (a destroyed handle that reaches either driver
// ends the process), a hang (a watchdog), an untyped error, or what outlives it (host
// functions, the context's count of objects).
//
// STREAMBRIDGE_CHAOS sets how long it runs (a Go duration; a second by default),
// STREAMBRIDGE_CHAOS_SEED its seed (else one from the clock, logged), and
// STREAMBRIDGE_CHAOS_CALLS, a regular expression, the calls it makes (all by default), to
// find which calls a failure needs.

// chaosDuration and chaosSeed read the soak's settings.
func chaosDuration(t *testing.T) time.Duration {
	v := os.Getenv("STREAMBRIDGE_CHAOS")
	if v == "" {
		return time.Second
	}
	d, err := time.ParseDuration(v)
	require.NoError(t, err, "STREAMBRIDGE_CHAOS")
	return d
}

// chaosChoice is the calls and closes STREAMBRIDGE_CHAOS_CALLS lets the soak make.
// Those that run device code are left out where the driver runs none (code false: chaosRunsCode).
func chaosChoice(t *testing.T, code bool) (calls, closes []chaosCall) {
	only, err := regexp.Compile(os.Getenv("STREAMBRIDGE_CHAOS_CALLS"))
	require.NoError(t, err, "STREAMBRIDGE_CHAOS_CALLS")
	for _, c := range chaosCalls {
		if only.MatchString(c.name) && (code || !chaosRunsCode[c.name]) {
			calls = append(calls, c)
		}
	}
	for _, c := range chaosCloses {
		if only.MatchString(c.name) && (code || !chaosRunsCode[c.name]) {
			closes = append(closes, c)
		}
	}
	require.NotEmpty(t, calls, "STREAMBRIDGE_CHAOS_CALLS=%s matches none of the soak's calls", only)
	return calls, closes
}

func chaosSeed(t *testing.T) uint64 {
	if v := os.Getenv("STREAMBRIDGE_CHAOS_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "STREAMBRIDGE_CHAOS_SEED")
		return seed
	}
	return uint64(time.Now().UnixNano())
}

// typedError reports whether err is one this package documents: a sentinel or a driver
// result. Anything else (a bare errors.New from deep inside, a panic turned error) fails
// the soak.
func typedError(err error) bool {
	var r Result
	var call *CallError
	for _, sentinel := range []error{ErrClosed, ErrInHostFunc, ErrCapturing, ErrNil, ErrWrongDriver,
		ErrWrongDevice, ErrWrongThread, ErrNoSuchDevice, ErrNoDriver} {
		if errors.Is(err, sentinel) {
			return true
		}
	}
	return errors.As(err, &call) || errors.As(err, &r)
}

// chaosPanic is what the soak's host functions that panic panic with.
const chaosPanic = "a host function of the chaos soak panics"

// chaosWorld is the objects the goroutines share.
type chaosWorld struct {
	c       *Context
	streams [4]atomic.Pointer[Stream]
	events  [4]atomic.Pointer[Event]
	graphs  [2]atomic.Pointer[Graph]
	execs   [2]atomic.Pointer[GraphExec]
	bufs    [2]atomic.Pointer[Buffer]
	kernels [2]atomic.Pointer[Function] // each of a module of its own; none where the driver runs no device code
	host    [2][]byte                   // what the copies copy from and to, alive till the soak ends (a graph may copy it)
	counts  sync.Map                    // call name -> *atomic.Int64, outcomes included
}

func (w *chaosWorld) count(name string, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	v, _ := w.counts.LoadOrStore(name+" "+outcome, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

// chaosWorker is one goroutine's state: the streams whose captures it began and has not
// ended (a global or thread-local one locks it to its thread until then).
type chaosWorker struct {
	w         *chaosWorld
	rng       *rand.Rand
	capturing []*Stream
}

// A call: its name, and the work. A call may return any typed error.
type chaosCall struct {
	name string
	run  func(k *chaosWorker) error
}

// chaosRunsCode names the calls that run device code, left out where the driver runs none.
var chaosRunsCode = map[string]bool{"Function.Launch": true, "Module.Close": true}

func (k *chaosWorker) stream() *Stream   { return k.w.streams[k.rng.IntN(len(k.w.streams))].Load() }
func (k *chaosWorker) event() *Event     { return k.w.events[k.rng.IntN(len(k.w.events))].Load() }
func (k *chaosWorker) exec() *GraphExec  { return k.w.execs[k.rng.IntN(len(k.w.execs))].Load() }
func (k *chaosWorker) graphSlot() int    { return k.rng.IntN(len(k.w.graphs)) }
func (k *chaosWorker) kernel() *Function { return k.w.kernels[k.rng.IntN(len(k.w.kernels))].Load() }

// chaosKernel loads a module of its own (kernels.ptx) and looks up its empty kernel.
func chaosKernel(c *Context) (*Function, error) {
	m, err := c.LoadModule(kernelsPTX)
	if err != nil {
		return nil, err
	}
	f, err := m.Function("empty")
	if err != nil {
		return nil, errors.Join(err, m.Close())
	}
	return f, nil
}

// buffer is a shared buffer and a host slice of its size.
func (k *chaosWorker) buffer() (*Buffer, []byte) {
	return k.w.bufs[k.rng.IntN(len(k.w.bufs))].Load(), k.w.host[k.rng.IntN(len(k.w.host))]
}
func (k *chaosWorker) mode() CaptureMode {
	return []CaptureMode{CaptureGlobal, CaptureThreadLocal, CaptureRelaxed}[k.rng.IntN(3)]
}

// hostFunc is a host function that does nothing, queries or closes its stream or a buffer,
// or panics.
func (k *chaosWorker) hostFunc(s *Stream) func() {
	switch k.rng.IntN(9) {
	case 3:
		b, _ := k.buffer()
		return func() { _ = b.Close() } // taken; its free runs elsewhere, once the host function returned
	case 0:
		return func() { _, _ = s.Query() } // ErrInHostFunc
	case 1:
		return func() { _ = s.Close() } // taken; its destroy runs elsewhere
	case 2:
		return func() { panic(chaosPanic) }
	}
	return func() {}
}

// keep puts a graph made by a capture where the others find it, closing the one before.
func (k *chaosWorker) keep(g *Graph) {
	if k.rng.IntN(2) == 0 {
		exec, err := g.Instantiate()
		k.w.count("Graph.Instantiate", err)
		if err == nil {
			if old := k.w.execs[k.rng.IntN(len(k.w.execs))].Swap(exec); old != nil {
				_ = old.Close()
			}
		}
	}
	if old := k.w.graphs[k.graphSlot()].Swap(g); old != nil {
		_ = old.Close()
	}
}

var chaosCalls = []chaosCall{
	{"Stream.Query", func(k *chaosWorker) error { _, err := k.stream().Query(); return err }},
	{"Stream.Synchronize", func(k *chaosWorker) error { return k.stream().Synchronize() }},
	{"Stream.Record", func(k *chaosWorker) error { return k.stream().Record(k.event()) }},
	{"Stream.WaitEvent", func(k *chaosWorker) error { return k.stream().WaitEvent(k.event()) }},
	{"Stream.WaitStream", func(k *chaosWorker) error { return k.stream().WaitStream(k.stream()) }},
	{"Stream.LaunchHostFunc", func(k *chaosWorker) error { s := k.stream(); return s.LaunchHostFunc(k.hostFunc(s)) }},
	{"Stream.Fence", func(k *chaosWorker) error {
		e, err := k.stream().Fence()
		if err == nil {
			err = e.Close()
		}
		return err
	}},
	{"Stream.CaptureInfo", func(k *chaosWorker) error { _, _, err := k.stream().CaptureInfo(); return err }},
	{"Stream.IsCapturing", func(k *chaosWorker) error { _, err := k.stream().IsCapturing(); return err }},
	{"Stream.Priority", func(k *chaosWorker) error { _, err := k.stream().Priority(); return err }},
	{"Stream.ID", func(k *chaosWorker) error { _, err := k.stream().ID(); return err }},
	{"Context.WrapStream", func(k *chaosWorker) error { // a borrowed wrapper of one of ours, used while its owner may close
		s := k.stream()
		b, err := s.Context().WrapStream(s.Handle())
		if err != nil {
			return err
		}
		_, err = b.Query()
		if err == nil {
			err = b.LaunchHostFunc(func() {})
		}
		return errors.Join(err, b.Close())
	}},
	{"Stream.BeginCapture", func(k *chaosWorker) error {
		s := k.stream()
		err := s.BeginCapture(k.mode())
		if err == nil {
			k.capturing = append(k.capturing, s)
		}
		return err
	}},
	{"Stream.EndCapture", func(k *chaosWorker) error { // mostly one of its own; one in five abandoned
		s := k.stream()
		if len(k.capturing) > 0 && k.rng.IntN(4) != 0 {
			i := k.rng.IntN(len(k.capturing))
			s = k.capturing[i]
			k.capturing = append(k.capturing[:i], k.capturing[i+1:]...)
			if k.rng.IntN(5) == 0 {
				return nil // abandoned: the stream's Close ends it
			}
		}
		g, err := s.EndCapture()
		if err == nil {
			k.keep(g)
		}
		return err
	}},
	{"Graph.NodeCount", func(k *chaosWorker) error { _, err := k.w.graphs[k.graphSlot()].Load().NodeCount(); return err }},
	{"Graph.Instantiate", func(k *chaosWorker) error {
		exec, err := k.w.graphs[k.graphSlot()].Load().Instantiate()
		if err == nil {
			if old := k.w.execs[k.rng.IntN(len(k.w.execs))].Swap(exec); old != nil {
				_ = old.Close()
			}
		}
		return err
	}},
	{"GraphExec.Launch", func(k *chaosWorker) error { return k.exec().Launch(k.stream()) }},
	{"GraphExec.Upload", func(k *chaosWorker) error { return k.exec().Upload(k.stream()) }},
	{"Event.Query", func(k *chaosWorker) error { _, err := k.event().Query(); return err }},
	{"Event.Synchronize", func(k *chaosWorker) error { return k.event().Synchronize() }},
	{"Event.ElapsedTime", func(k *chaosWorker) error { _, err := k.event().ElapsedTime(k.event()); return err }},
	{"CopyToDevice", func(k *chaosWorker) error { b, h := k.buffer(); return CopyToDevice(b, h) }},
	{"CopyFromDevice", func(k *chaosWorker) error { b, h := k.buffer(); return CopyFromDevice(h, b) }},
	{"CopyToDeviceAsync", func(k *chaosWorker) error { b, h := k.buffer(); return CopyToDeviceAsync(b, h, k.stream()) }},
	{"CopyFromDeviceAsync", func(k *chaosWorker) error { b, h := k.buffer(); return CopyFromDeviceAsync(h, b, k.stream()) }},
	{"Function.Launch", func(k *chaosWorker) error { return k.kernel().Launch(k.stream(), LaunchConfig{}, nil) }},
}

// closes are the closes, each of one kind of object, remade at once.
var chaosCloses = []chaosCall{
	{"Stream.Close", func(k *chaosWorker) error {
		i := k.rng.IntN(len(k.w.streams))
		err := k.w.streams[i].Load().Close()
		s, errNew := k.w.c.NewStream(StreamOptions{NonBlocking: k.rng.IntN(2) == 0})
		if errNew != nil {
			return errors.Join(err, errNew)
		}
		if old := k.w.streams[i].Swap(s); old != nil {
			_ = old.Close()
		}
		return err
	}},
	{"Event.Close", func(k *chaosWorker) error {
		i := k.rng.IntN(len(k.w.events))
		err := k.w.events[i].Load().Close()
		e, errNew := k.w.c.NewEvent(EventOptions{DisableTiming: k.rng.IntN(2) == 0})
		if errNew != nil {
			return errors.Join(err, errNew)
		}
		if old := k.w.events[i].Swap(e); old != nil {
			_ = old.Close()
		}
		return err
	}},
	{"Graph.Close", func(k *chaosWorker) error { return k.w.graphs[k.graphSlot()].Load().Close() }},
	{"GraphExec.Close", func(k *chaosWorker) error { return k.exec().Close() }},
	{"Buffer.Close", func(k *chaosWorker) error { // and Context.Alloc
		i := k.rng.IntN(len(k.w.bufs))
		err := k.w.bufs[i].Load().Close()
		b, errNew := k.w.c.Alloc(chaosBufferSize)
		if errNew != nil {
			return errors.Join(err, errNew)
		}
		if old := k.w.bufs[i].Swap(b); old != nil {
			_ = old.Close()
		}
		return err
	}},
	{"Module.Close", func(k *chaosWorker) error { // and Context.LoadModule
		if k.rng.IntN(10) != 0 {
			return nil // a load compiles PTX (milliseconds) and synchronizes the context: one pick in ten
		}
		f, err := chaosKernel(k.w.c)
		if err != nil {
			return err
		}
		if old := k.w.kernels[k.rng.IntN(len(k.w.kernels))].Swap(f); old != nil {
			return old.module.Close()
		}
		return nil
	}},
}

// chaosBufferSize is the size of the soak's buffers and host slices.
const chaosBufferSize = 4096

func TestChaosSoak(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		panics := capturePanics(t)
		seed := chaosSeed(t)
		c := primary(t, d, 0)
		w := &chaosWorld{c: c}
		code := true
		for i := range w.kernels {
			f, err := chaosKernel(c)
			if errors.Is(err, ErrNotSupported) { // the driver runs no device code
				code = false
				break
			}
			require.NoError(t, err)
			w.kernels[i].Store(f)
		}
		calls, closes := chaosChoice(t, code)
		t.Logf("STREAMBRIDGE_CHAOS_SEED=%d: %d calls, %d closes (device code: %v)", seed, len(calls), len(closes), code)
		hostFuncsBefore := settledHostFuncs()
		for i := range w.streams {
			s, err := c.NewStream(StreamOptions{})
			require.NoError(t, err)
			w.streams[i].Store(s)
		}
		for i := range w.events {
			e, err := c.NewEvent(EventOptions{})
			require.NoError(t, err)
			w.events[i].Store(e)
		}
		for i := range w.bufs {
			b, err := c.Alloc(chaosBufferSize)
			require.NoError(t, err)
			w.bufs[i].Store(b)
			w.host[i] = make([]byte, chaosBufferSize)
		}
		// A graph and an executable to begin with: a captured host function.
		s := w.streams[0].Load()
		require.NoError(t, s.BeginCapture(CaptureRelaxed))
		require.NoError(t, s.LaunchHostFunc(func() {}))
		g, err := s.EndCapture()
		require.NoError(t, err)
		for i := range w.graphs {
			w.graphs[i].Store(g)
		}
		for i := range w.execs {
			exec, err := g.Instantiate()
			require.NoError(t, err)
			w.execs[i].Store(exec)
		}

		const workers = 8
		deadline := time.Now().Add(chaosDuration(t))
		var made atomic.Int64
		untyped := make(chan error, workers)
		var wg sync.WaitGroup
		for n := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				k := &chaosWorker{w: w, rng: rand.New(rand.NewPCG(seed, uint64(n)))}
				for time.Now().Before(deadline) {
					call := calls[k.rng.IntN(len(calls))]
					if len(closes) > 0 && k.rng.IntN(10) == 0 {
						call = closes[k.rng.IntN(len(closes))]
					}
					err := call.run(k)
					w.count(call.name, err)
					made.Add(1)
					if err != nil && !typedError(err) {
						untyped <- fmt.Errorf("%s: %w (%T)", call.name, err, err)
						return
					}
				}
			}()
		}
		finished := make(chan struct{})
		go func() { wg.Wait(); close(finished) }()
		select {
		case <-finished:
		case <-time.After(time.Until(deadline) + 30*time.Second):
			// The process ends here: the cleanups would wait for the same calls.
			var stacks bytes.Buffer
			_ = pprof.Lookup("goroutine").WriteTo(&stacks, 2)
			fmt.Fprintf(os.Stderr, "--- FAIL: %s: hang: the workers were still in calls 30 s after their deadline (seed %d)\n%s", t.Name(), seed, stacks.String())
			os.Exit(1)
		}
		close(untyped)
		for err := range untyped {
			assert.NoError(t, err, "an untyped error (seed %d)", seed)
		}
		var outcomes []string
		w.counts.Range(func(k, v any) bool {
			outcomes = append(outcomes, fmt.Sprintf("%s %d", k, v.(*atomic.Int64).Load()))
			return true
		})
		reported := panics()
		for _, err := range reported {
			var p *HostFuncPanic
			if errors.As(err, &p) && p.Value == chaosPanic {
				continue
			}
			assert.NoError(t, err, "a host function's panic that none of the soak's made (seed %d)", seed)
		}
		t.Logf("%d calls (%d host function panics reported): %v", made.Load(), len(reported), outcomes)

		// What the soak leaves is closed; every host function is given back, and the context
		// counts no object of the soak's once their last work has run.
		for i := range w.streams {
			_ = w.streams[i].Load().Synchronize()
			require.NoError(t, w.streams[i].Load().Close())
		}
		for i := range w.events {
			require.NoError(t, w.events[i].Load().Close())
		}
		for i := range w.execs {
			require.NoError(t, w.execs[i].Load().Close())
		}
		for i := range w.graphs {
			require.NoError(t, w.graphs[i].Load().Close())
		}
		for i := range w.bufs {
			require.NoError(t, w.bufs[i].Load().Close())
		}
		for i := range w.kernels {
			if f := w.kernels[i].Load(); f != nil {
				require.NoError(t, f.module.Close())
			}
		}
		runtime.GC()
		if !assert.Eventually(t, func() bool { return LiveHostFuncs() == hostFuncsBefore }, 10*time.Second, time.Millisecond,
			"host functions left registered: %d, before %d", LiveHostFuncs(), hostFuncsBefore) {
			once, kept := driver.LiveHostFuncKinds()
			t.Logf("left: %d to run once, %d kept for graphs", once, kept)
		}
		assert.Eventually(t, func() bool { return c.refs.Load() <= int64(1+maxIdleFences) }, 10*time.Second, time.Millisecond,
			"objects alive in the context after the soak: %d", c.refs.Load())
	})
}
