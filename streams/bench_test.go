package streams

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streambridge/streambridge/internal/driver"
	"github.com/streambridge/streambridge/internal/sim"
	"golang.org/x/sync/errgroup"
)

// Benchmarks of the paths the issue sets targets for, on the real driver. bench/run.sh
// runs them beside bench/driver_bench.c, the same loops in C, and prints the ratios. The
// Raw variants call the driver through purego with no wrapper, to show where time goes.

type benchEnv struct {
	c     *Context
	a, b  *Stream
	e     *Event
	empty *Function
}

func setupBench(b *testing.B) benchEnv {
	d := realDriver(b)
	c := primary(b, d, 0)
	env := benchEnv{
		c:     c,
		a:     newStream(b, c, StreamOptions{NonBlocking: true}),
		b:     newStream(b, c, StreamOptions{NonBlocking: true}),
		e:     newEvent(b, c, EventOptions{DisableTiming: true}),
		empty: testKernel(b, c, "empty"),
	}
	b.Cleanup(func() { _ = env.a.Synchronize(); _ = env.b.Synchronize() })
	warm(b, c)
	b.ReportAllocs()
	b.ResetTimer()
	return env
}

// loop runs body b.N times on a thread where the context is current, as the C program
// runs (it sets it once); the NoContext variants show a thread without one.
func (env benchEnv) loop(b *testing.B, body func()) {
	if err := env.c.Do(func() error {
		for b.Loop() {
			body()
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
}

// The operations C's loops time too (bench/floor.h), once each: the benchmark of the same
// name runs one, and BenchmarkInProcessC runs it taking turns with C's loop.

func goRecordWait(env benchEnv) error {
	if err := env.a.Record(env.e); err != nil {
		return err
	}
	return env.b.WaitEvent(env.e)
}

func goQuery(env benchEnv) error {
	_, err := env.a.Query()
	return err
}

func goEventCreateClose(env benchEnv) error {
	e, err := env.c.NewEvent(EventOptions{DisableTiming: true})
	if err != nil {
		return err
	}
	return e.Close()
}

// The Raw operations: the same driver calls through the trampoline (the API every driver
// call takes, runtime.cgocall), no streams layer around them.

func goRecordWaitRaw(env benchEnv) error {
	api, c, e := env.c.api, env.c.handle, driver.Event(env.e.Handle())
	if r := api.EventRecord(c, e, driver.Stream(env.a.Handle())); r != driver.Success {
		return env.c.drv.check("cuEventRecord", r)
	}
	if r := api.StreamWaitEvent(c, driver.Stream(env.b.Handle()), e, 0); r != driver.Success {
		return env.c.drv.check("cuStreamWaitEvent", r)
	}
	return nil
}

func goQueryRaw(env benchEnv) error {
	if r := env.c.api.StreamQuery(env.c.handle, driver.Stream(env.a.Handle())); r != driver.Success && r != driver.ErrorNotReady {
		return env.c.drv.check("cuStreamQuery", r)
	}
	return nil
}

func goEventCreateCloseRaw(env benchEnv) error {
	e, r := env.c.api.EventCreate(env.c.handle, driver.EventDisableTiming)
	if r != driver.Success {
		return env.c.drv.check("cuEventCreate", r)
	}
	if r := env.c.api.EventDestroy(e); r != driver.Success {
		return env.c.drv.check("cuEventDestroy", r)
	}
	return nil
}

func goCrossing(env benchEnv) error {
	if _, r := env.c.api.DriverGetVersion(); r != driver.Success {
		return env.c.drv.check("cuDriverGetVersion", r)
	}
	return nil
}

// bench runs op b.N times as loop does.
func (env benchEnv) bench(b *testing.B, op func(benchEnv) error) {
	env.loop(b, func() {
		if err := op(env); err != nil {
			b.Fatal(err)
		}
	})
}

func BenchmarkRecordWait(b *testing.B) { setupBench(b).bench(b, goRecordWait) }

// BenchmarkWaitStream is record+wait as WaitStream does it: one crossing for both calls.
func BenchmarkWaitStream(b *testing.B) {
	env := setupBench(b)
	env.loop(b, func() {
		if err := env.b.WaitStream(env.a); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkRecordWaitRaw is the driver's two calls through the trampoline, no streams
// layer around them.
func BenchmarkRecordWaitRaw(b *testing.B) { setupBench(b).bench(b, goRecordWaitRaw) }

// warm puts the driver in one defined state before every benchmark, as
// bench/driver_bench.c does: the cost of some calls depends on what the process did before
// (cuStreamQuery: 1.4 us in a fresh process or after a launch, 0.23 us after event
// traffic, in C and Go alike on an H200). It runs 2M record+wait pairs on two scratch
// streams, then destroys them.
func warm(b *testing.B, c *Context) {
	err := c.Do(func() error {
		a1, _ := c.NewStream(StreamOptions{NonBlocking: true})
		b1, _ := c.NewStream(StreamOptions{NonBlocking: true})
		e1, _ := c.NewEvent(EventOptions{DisableTiming: true})
		for range 2_000_000 {
			_ = a1.Record(e1)
			_ = b1.WaitEvent(e1)
		}
		_ = a1.Synchronize()
		_ = b1.Synchronize()
		_ = e1.Close()
		_ = a1.Close()
		return b1.Close()
	})
	if err != nil {
		b.Fatal(err)
	}
}

// queryReady gives the stream to query completed work, as the C loop's stream has.
func queryReady(b *testing.B, env benchEnv) {
	if err := env.a.Record(env.e); err != nil {
		b.Fatal(err)
	}
	if err := env.a.Synchronize(); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkQuery(b *testing.B) {
	env := setupBench(b)
	queryReady(b, env)
	env.bench(b, goQuery)
}

func BenchmarkQueryRaw(b *testing.B) {
	env := setupBench(b)
	queryReady(b, env)
	env.bench(b, goQueryRaw)
}

// BenchmarkCrossing is one call into the driver that does nothing there (cuDriverGetVersion)
// through the path every driver call takes (the API, runtime.cgocall, the trampoline), as
// C's Crossing is the same call made directly: Go's row minus C's is what each Go call pays
// to reach C, which no layer above the crossing can take away. A record and a wait are two
// crossings, a query one (bench/RESULTS.md, issue 29).
func BenchmarkCrossing(b *testing.B) { setupBench(b).bench(b, goCrossing) }

// BenchmarkRecordWaitNoContext is RecordWait from a thread with no current context: the
// trampoline then makes the context current and restores none around each call.
func BenchmarkRecordWaitNoContext(b *testing.B) {
	env := setupBench(b)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	env.c.api.CtxSetCurrent(0)
	for b.Loop() {
		_ = env.a.Record(env.e)
		_ = env.b.WaitEvent(env.e)
	}
}

func BenchmarkQueryNoContext(b *testing.B) {
	env := setupBench(b)
	queryReady(b, env)
	api, s := env.c.api, driver.Stream(env.a.Handle())
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	api.CtxSetCurrent(0)
	for b.Loop() {
		api.StreamQuery(0, s)
	}
}

// BenchmarkEventCreateClose makes events with timing off, as the C loops and Python's
// benchmark do.
func BenchmarkEventCreateClose(b *testing.B) { setupBench(b).bench(b, goEventCreateClose) }

// BenchmarkEventCreateCloseRaw is the driver's two calls through the trampoline, no
// streams layer around them.
func BenchmarkEventCreateCloseRaw(b *testing.B) { setupBench(b).bench(b, goEventCreateCloseRaw) }

func BenchmarkLaunchEmpty(b *testing.B) {
	env := setupBench(b)
	var args Args
	env.loop(b, func() {
		if err := env.empty.Launch(env.a, LaunchConfig{}, &args); err != nil {
			b.Fatal(err)
		}
	})
	_ = env.a.Synchronize()
}

func BenchmarkLaunchEmptyRaw(b *testing.B) {
	env := setupBench(b)
	api, c, f, s := env.c.api, env.c.handle, env.empty.handle, driver.Stream(env.a.Handle())
	env.loop(b, func() {
		api.LaunchKernel(c, f, 1, 1, 1, 1, 1, 1, 0, s, nil)
	})
	_ = env.a.Synchronize()
}

// BenchmarkHostFuncLatency times enqueue-to-run of one host function: enqueue, then spin
// until it has run, as the C loop does.
func BenchmarkHostFuncLatency(b *testing.B) {
	env := setupBench(b)
	var ran atomic.Int32
	fn := func() { ran.Store(1) }
	env.loop(b, func() {
		ran.Store(0)
		if err := env.a.LaunchHostFunc(fn); err != nil {
			b.Fatal(err)
		}
		for ran.Load() == 0 {
		}
	})
}

// BenchmarkHostFuncBurst is 64 host functions launched back to back, then Synchronize: the
// rate at which a stream runs them (ns/op is per burst), as the C loop has it.
func BenchmarkHostFuncBurst(b *testing.B) {
	env := setupBench(b)
	var ran atomic.Int64
	fn := func() { ran.Add(1) }
	env.loop(b, func() {
		for range 64 {
			if err := env.a.LaunchHostFunc(fn); err != nil {
				b.Fatal(err)
			}
		}
		if err := env.a.Synchronize(); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkSynchronizeBehindHostFunc is a Synchronize waiting for a Go host function of
// 100 us on its stream. The wait polls (Driver.wait), yielding its P between questions for
// its first 50 ms, so that the host function, which needs a P to run Go, is not held up by
// it whatever GOMAXPROCS is: run it with -cpu 1,4 (ns/op is the 100 us and what the two
// cost). Without the yield, with GOMAXPROCS=1 on the software driver, such a wait behind a
// host function of 1 ms took 40 ms on average; with it, 1.1 ms.
func BenchmarkSynchronizeBehindHostFunc(b *testing.B) {
	env := setupBench(b)
	fn := func() { time.Sleep(100 * time.Microsecond) }
	env.loop(b, func() {
		if err := env.a.LaunchHostFunc(fn); err != nil {
			b.Fatal(err)
		}
		if err := env.a.Synchronize(); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkStreamIdentity is a foreign handle proven live and its device and identity
// found, keeping nothing: what Python's ExternalStream(ptr) costs below the crossing.
func BenchmarkStreamIdentity(b *testing.B) {
	env := setupBench(b)
	d, h := env.c.drv, env.a.Handle()
	env.loop(b, func() {
		if _, _, err := d.StreamIdentity(h); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkVerifyStream is the identity check a borrowed stream makes before each use.
func BenchmarkVerifyStream(b *testing.B) {
	env := setupBench(b)
	d, h := env.c.drv, env.a.Handle()
	_, id, err := d.StreamIdentity(h)
	if err != nil {
		b.Fatal(err)
	}
	env.loop(b, func() {
		if err := d.VerifyStream(h, id); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkWrapStream is a foreign handle proven live and wrapped, then forgotten: what a
// borrowed stream costs the first time a call needs it in Go.
func BenchmarkWrapStream(b *testing.B) {
	env := setupBench(b)
	d, h := env.c.drv, env.a.Handle()
	env.loop(b, func() {
		s, err := d.WrapStream(h)
		if err != nil {
			b.Fatal(err)
		}
		_ = s.Close()
	})
}

// BenchmarkStreamCheck is the validation alone (see internal/cuda/validate.go).
func BenchmarkStreamCheck(b *testing.B) {
	env := setupBench(b)
	api, h := env.c.api, driver.Stream(env.a.Handle())
	env.loop(b, func() {
		if _, _, r := api.StreamCheck(h); r != driver.Success {
			b.Fatal(r)
		}
	})
}

// BenchmarkInProcessC is the C floor inside this process, taking turns with Go:
// bench/inproc.c's loops, built as a shared library that STREAMBRIDGE_INPROC_C names
// (bench/run.sh builds it), on streams and an event made as the Go benchmark of the same
// name makes them, inprocTurn calls of each side in turn (C's loop, Go's operation, the
// same driver calls through the trampoline with no layer, C's relaxed query), and again.
// One host ran the same calls at one of two speeds, a process at a time and now and then
// within one (C too, and whichever pinning: bench/RESULTS.md, "One host, two speeds");
// turns of a few milliseconds meet it at the same speed. ns/op is C's; go-ns/op Go's,
// raw-ns/op the Raw benchmark's, relaxed-ns/op C's query with the thread's capture mode
// relaxed around it as streambridge's is (issue 25), each in the same turns.
func BenchmarkInProcessC(b *testing.B) {
	c := loadInprocessC(b)
	for _, op := range []struct {
		name  string
		ready func(*testing.B, benchEnv) // what the Go benchmark of the name does first, if anything
		sides []inprocSide               // C's loop first: its ns/op
	}{
		{"RecordWait", nil, []inprocSide{
			cSide("ns/op", func(env benchEnv, n int64) float64 {
				return c.recordWait(env.a.Handle(), env.b.Handle(), env.e.Handle(), n)
			}),
			goSide("go-ns/op", goRecordWait), goSide("raw-ns/op", goRecordWaitRaw)}},
		{"Query", queryReady, []inprocSide{
			cSide("ns/op", func(env benchEnv, n int64) float64 { return c.query(env.a.Handle(), n) }),
			goSide("go-ns/op", goQuery), goSide("raw-ns/op", goQueryRaw),
			cSide("relaxed-ns/op", func(env benchEnv, n int64) float64 { return c.queryRelaxed(env.a.Handle(), n) })}},
		{"EventCreateClose", nil, []inprocSide{
			cSide("ns/op", func(_ benchEnv, n int64) float64 { return c.eventCreateDestroy(n) }),
			goSide("go-ns/op", goEventCreateClose), goSide("raw-ns/op", goEventCreateCloseRaw)}},
		{"Crossing", nil, []inprocSide{
			cSide("ns/op", func(_ benchEnv, n int64) float64 { return c.crossing(n) }), goSide("go-ns/op", goCrossing)}},
	} {
		env := setupBench(b) // fresh streams and event for each, warmed, as each Go benchmark's
		if op.ready != nil {
			op.ready(b, env)
		}
		b.Run(op.name, func(b *testing.B) { reportTurns(b, env, inprocTurn, op.sides) })
	}
}

// takeTurns runs sides in turns of turn calls each, calls in all, on a thread where env's
// context is current, and gives each side's ns a call: the one loop of both InProcessC
// benchmarks.
func takeTurns(env benchEnv, calls, turn int, sides []inprocSide) ([]float64, error) {
	total := make([]float64, len(sides))
	err := env.c.Do(func() error {
		for done := 0; done < calls; {
			n := min(turn, calls-done)
			for i, side := range sides {
				ns, err := side.run(env, n)
				if err != nil {
					return fmt.Errorf("%s: %w", side.unit, err)
				}
				total[i] += ns
			}
			done += n
		}
		return nil
	})
	for i := range total {
		total[i] /= float64(calls)
	}
	return total, err
}

// reportTurns is takeTurns of b.N calls, each side's ns a call reported under its unit.
func reportTurns(b *testing.B, env benchEnv, turn int, sides []inprocSide) {
	perCall, err := takeTurns(env, b.N, turn, sides)
	require.NoError(b, err)
	for i, side := range sides {
		b.ReportMetric(perCall[i], side.unit)
	}
}

// TestTakeTurnsGivesEverySideItsTurnAndItsTime holds the InProcessC benchmarks' loop (run
// only on a GPU machine) to its turns: every side makes turn calls in each turn, the last
// turn the rest, and each side's time is its own.
func TestTakeTurnsGivesEverySideItsTurnAndItsTime(t *testing.T) {
	eachDriver(t, func(t *testing.T, d *Driver) {
		var turns [2][]int
		side := func(i int, ns float64) inprocSide {
			return inprocSide{fmt.Sprintf("side%d-ns/op", i), func(_ benchEnv, n int) (float64, error) {
				turns[i] = append(turns[i], n)
				return ns * float64(n), nil
			}}
		}
		perCall, err := takeTurns(benchEnv{c: primary(t, d, 0)}, 10, 3, []inprocSide{side(0, 5), side(1, 40)})
		require.NoError(t, err)
		assert.Equal(t, [2][]int{{3, 3, 3, 1}, {3, 3, 3, 1}}, turns)
		assert.Equal(t, []float64{5, 40}, perCall)
		failing := inprocSide{"bad-ns/op", func(benchEnv, int) (float64, error) { return 0, errors.New("the driver failed") }}
		_, err = takeTurns(benchEnv{c: primary(t, d, 0)}, 10, 3, []inprocSide{side(0, 5), failing})
		require.ErrorContains(t, err, "bad-ns/op: the driver failed")
	})
}

// inprocSide is one side of BenchmarkInProcessC's turns: run makes n calls and gives the
// ns they took, all told; unit names its ns a call.
type inprocSide struct {
	unit string
	run  func(env benchEnv, n int) (float64, error)
}

// goSide is n calls of op from Go, timed.
func goSide(unit string, op func(benchEnv) error) inprocSide {
	return inprocSide{unit, func(env benchEnv, n int) (float64, error) {
		start := time.Now()
		for range n {
			if err := op(env); err != nil {
				return 0, err
			}
		}
		return float64(time.Since(start).Nanoseconds()), nil
	}}
}

// cSide is one of bench/inproc.c's loops, n calls, which times itself (ns a call; below 0
// where the driver failed).
func cSide(unit string, loop func(env benchEnv, n int64) float64) inprocSide {
	return inprocSide{unit, func(env benchEnv, n int) (float64, error) {
		ns := loop(env, int64(n))
		if ns < 0 {
			return 0, errors.New("the driver failed in bench/inproc.c's loop")
		}
		return ns * float64(n), nil
	}}
}

// inprocessC is bench/inproc.c's functions as Go calls them (purego), each declared once
// in inprocessC.funcs, which TestInprocessCSignatures holds to inproc.c's definitions.
type inprocessC struct {
	recordWait          func(a, s, e uintptr, n int64) float64
	query, queryRelaxed func(s uintptr, n int64) float64
	eventCreateDestroy  func(n int64) float64
	crossing            func(n int64) float64
	throughput          func(ctx uintptr, query, n int32, iters int64) float64
}

// funcs are c's functions by their names in bench/inproc.c.
func (c *inprocessC) funcs() map[string]any {
	return map[string]any{
		"record_wait_ns": &c.recordWait, "query_ns": &c.query, "query_relaxed_ns": &c.queryRelaxed,
		"event_create_destroy_ns": &c.eventCreateDestroy, "crossing_ns": &c.crossing, "throughput_ns": &c.throughput,
	}
}

// TestInprocessCSignatures holds inprocessC's Go declarations to bench/inproc.c's
// definitions, which python_bench.py reads itself: a C function whose arguments change
// fails here, not as a wrong call on the GPU machine.
func TestInprocessCSignatures(t *testing.T) {
	src, err := os.ReadFile("../bench/inproc.c")
	require.NoError(t, err)
	defs := map[string][]string{} // name: the return type, then each argument's type
	for _, m := range regexp.MustCompile(`(?m)^(\w+) (\w+)\(([^)]*)\) \{`).FindAllStringSubmatch(string(src), -1) {
		types := []string{m[1]}
		for _, arg := range strings.Split(m[3], ",") {
			words := strings.Fields(arg)
			types = append(types, strings.Join(words[:len(words)-1], " "))
		}
		defs[m[2]] = types
	}
	goType := map[string]reflect.Kind{"double": reflect.Float64, "long": reflect.Int64, "int": reflect.Int32,
		"CUstream": reflect.Uintptr, "CUevent": reflect.Uintptr, "CUcontext": reflect.Uintptr}
	var c inprocessC
	for name, fn := range c.funcs() {
		def, ok := defs[name]
		require.True(t, ok, "bench/inproc.c defines no %s", name)
		f := reflect.TypeOf(fn).Elem()
		require.Equal(t, 1, f.NumOut(), name)
		require.Equal(t, goType[def[0]], f.Out(0).Kind(), "%s returns %s", name, def[0])
		require.Equal(t, len(def)-1, f.NumIn(), "%s's arguments: %v", name, def[1:])
		for i, ctype := range def[1:] {
			require.Equal(t, goType[ctype], f.In(i).Kind(), "%s's argument %d, a %s", name, i+1, ctype)
		}
	}
}

// loadInprocessC loads the build of bench/inproc.c that STREAMBRIDGE_INPROC_C names, or skips.
func loadInprocessC(b *testing.B) *inprocessC {
	path := os.Getenv("STREAMBRIDGE_INPROC_C")
	if path == "" {
		b.Skip("STREAMBRIDGE_INPROC_C names no build of bench/inproc.c (bench/run.sh builds one)")
	}
	lib, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	require.NoError(b, err)
	var c inprocessC
	for name, fn := range c.funcs() {
		purego.RegisterLibFunc(fn, lib, name)
	}
	return &c
}

// BenchmarkInProcessCThroughput is the throughput rows' C threads inside this process
// (bench/inproc.c's throughput_ns: floor.h's harness, which driver_bench's threads run
// too), taking turns with Go's goroutines as BenchmarkInProcessC does (takeTurns):
// inprocTurn calls a thread, n C threads, then n Go goroutines (throughputRun, which the Go
// rows of the same names run), and again, b.N calls in all, each side's threads on streams and events made
// for the turn. ns/op is C's wall time a call over all its threads; go-ns/op is Go's, in
// the same turns.
func BenchmarkInProcessCThroughput(b *testing.B) {
	throughputC := loadInprocessC(b).throughput
	c := primary(b, realDriver(b), 0)
	for query, op := range []struct { // query: throughput_ns's 0 or 1
		name string
		goOp func(benchEnv) error
	}{{"RecordWaitThroughput", goRecordWait}, {"QueryThroughput", goQuery}} {
		for _, n := range throughputCounts {
			b.Run(fmt.Sprintf("%s/goroutines=%d", op.name, n), func(b *testing.B) {
				if b.N > 1 { // not for testing's first run of one call, whose time is dropped
					warm(b, c)
				}
				reportTurns(b, benchEnv{c: c}, inprocTurn*n, []inprocSide{
					cSide("ns/op", func(_ benchEnv, calls int64) float64 {
						return throughputC(c.Handle(), int32(query), int32(n), calls)
					}),
					// Fresh streams and event for each turn's goroutines, as C's threads make
					// theirs: a goroutine then owns what it uses (its calls take no locked
					// instruction: streams/uses.go), as the goroutines of the Go rows do.
					{"go-ns/op", func(_ benchEnv, calls int) (float64, error) {
						envs, free := throughputEnvs(b, c, n)
						defer free()
						took, err := throughputRun(envs, calls, op.goOp)
						return float64(took.Nanoseconds()), err
					}},
				})
			})
		}
	}
}

// inprocTurn is the calls each side (a C thread, a Go goroutine) makes in one turn of the
// InProcessC benchmarks: a few milliseconds, which the host spends at one speed.
const inprocTurn = 20000

// throughputCounts are the goroutine counts of the throughput benchmarks, as the C
// program's thread counts (bench/driver_bench.c, "threads").
var throughputCounts = []int{1, 2, 4, 8, 16}

// throughputEnvs makes n goroutines' own streams and event: two non-blocking streams and an
// event without timing each, as C's threads have. free synchronizes and closes them.
func throughputEnvs(b *testing.B, c *Context, n int) (envs []benchEnv, free func()) {
	envs = make([]benchEnv, n)
	for i := range envs {
		a, err := c.NewStream(StreamOptions{NonBlocking: true})
		require.NoError(b, err)
		s, err := c.NewStream(StreamOptions{NonBlocking: true})
		require.NoError(b, err)
		e, err := c.NewEvent(EventOptions{DisableTiming: true})
		require.NoError(b, err)
		envs[i] = benchEnv{c: c, a: a, b: s, e: e}
	}
	return envs, func() {
		for _, env := range envs {
			require.NoError(b, env.a.Synchronize())
			require.NoError(b, env.b.Synchronize())
			require.NoError(b, errors.Join(env.e.Close(), env.a.Close(), env.b.Close()))
		}
	}
}

// throughput runs op from n goroutines at once (throughputRun), b.N calls in all: ns/op is
// wall time per call over all of them, and calls/s is reported. bench/run.sh runs these
// unpinned, beside the C program's threads.
func throughput(b *testing.B, n int, op func(benchEnv) error) {
	c := primary(b, realDriver(b), 0)
	envs, free := throughputEnvs(b, c, n)
	defer free()
	if b.N > 1 { // not for testing's first run of one call, whose time is dropped
		warm(b, c)
	}
	b.ReportAllocs()
	b.ResetTimer()
	took, err := throughputRun(envs, b.N, op)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(took.Nanoseconds())/float64(b.N), "ns/op")
	b.ReportMetric(float64(b.N)/took.Seconds(), "calls/s")
}

// throughputRun runs op from one goroutine per env at once, each on an OS thread of its own
// with the context current, calls in all, and gives the wall time from their common start
// to the end of the last.
func throughputRun(envs []benchEnv, calls int, op func(benchEnv) error) (time.Duration, error) {
	var ready, start sync.WaitGroup
	ready.Add(len(envs))
	start.Add(1)
	var group errgroup.Group
	for i, env := range envs {
		mine := calls / len(envs)
		if i < calls%len(envs) {
			mine++
		}
		group.Go(func() error {
			return env.c.Do(func() error {
				ready.Done()
				start.Wait()
				for range mine {
					if err := op(env); err != nil {
						return err
					}
				}
				return nil
			})
		})
	}
	ready.Wait()
	t0 := time.Now()
	start.Done()
	err := group.Wait()
	return time.Since(t0), err
}

// BenchmarkRecordWaitThroughput is record+wait pairs (one call: a pair) from 1 to 16
// goroutines at once.
func BenchmarkRecordWaitThroughput(b *testing.B) {
	for _, n := range throughputCounts {
		b.Run(fmt.Sprintf("goroutines=%d", n), func(b *testing.B) {
			throughput(b, n, goRecordWait)
		})
	}
}

// BenchmarkQueryThroughput is queries of a stream whose work is done, from 1 to 16
// goroutines at once.
func BenchmarkQueryThroughput(b *testing.B) {
	for _, n := range throughputCounts {
		b.Run(fmt.Sprintf("goroutines=%d", n), func(b *testing.B) {
			throughput(b, n, goQuery)
		})
	}
}

// nullCalls is the software driver whose hot calls return at once: the Layer benchmarks
// measure what the streams layer costs around them (the use counts, the checks), on any
// machine, no GPU needed; issue 29 keeps it inside Go's 1.1x of C.
type nullCalls struct{ driver.API }

func (nullCalls) EventRecord(driver.Context, driver.Event, driver.Stream) driver.Result {
	return driver.Success
}
func (nullCalls) StreamWaitEvent(driver.Context, driver.Stream, driver.Event, uint32) driver.Result {
	return driver.Success
}
func (nullCalls) StreamQuery(driver.Context, driver.Stream) driver.Result { return driver.Success }
func (nullCalls) EventCreate(driver.Context, uint32) (driver.Event, driver.Result) {
	return driver.Event(0x1000), driver.Success
}
func (nullCalls) EventDestroy(driver.Event) driver.Result { return driver.Success }
func (nullCalls) EventRecordAndWait(driver.Context, driver.Event, driver.Stream, driver.Stream) (driver.Result, bool) {
	return driver.Success, true
}

// BenchmarkLayerRecordWait is the streams layer around a record and a wait by the
// goroutine that owns the objects' uses (the first to use them, uses.go); the Shared one
// by another goroutine, whose calls take the atomic count.
func BenchmarkLayerRecordWait(b *testing.B) { benchLayerRecordWait(b, false) }

func BenchmarkLayerRecordWaitShared(b *testing.B) { benchLayerRecordWait(b, true) }

func benchLayerRecordWait(b *testing.B, shared bool) {
	d := newDriver(nullCalls{sim.New()})
	c := primary(b, d, 0)
	sa, sb := newStream(b, c, StreamOptions{NonBlocking: true}), newStream(b, c, StreamOptions{NonBlocking: true})
	e := newEvent(b, c, EventOptions{DisableTiming: true})
	if shared { // another goroutine uses them first
		used := make(chan error)
		go func() { used <- errors.Join(sa.Record(e), sb.WaitEvent(e)) }()
		require.NoError(b, <-used)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := sa.Record(e); err != nil {
			b.Fatal(err)
		}
		if err := sb.WaitEvent(e); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLayerRecordWaitParallel is BenchmarkLayerRecordWait from GOMAXPROCS goroutines
// at once, each on streams and an event of its own: what the streams layer's shared state
// (the capture lock's stripes, the context) costs when threads meet.
func BenchmarkLayerRecordWaitParallel(b *testing.B) {
	d := newDriver(nullCalls{sim.New()})
	c := primary(b, d, 0)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		sa, errA := c.NewStream(StreamOptions{NonBlocking: true})
		sb, errB := c.NewStream(StreamOptions{NonBlocking: true})
		e, errE := c.NewEvent(EventOptions{DisableTiming: true})
		if err := errors.Join(errA, errB, errE); err != nil {
			b.Error(err)
			return
		}
		defer func() { _ = errors.Join(sa.Close(), sb.Close(), e.Close()) }()
		for pb.Next() {
			if err := sa.Record(e); err != nil {
				b.Error(err)
				return
			}
			if err := sb.WaitEvent(e); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkLayerQuery(b *testing.B) {
	d := newDriver(nullCalls{sim.New()})
	c := primary(b, d, 0)
	s := newStream(b, c, StreamOptions{NonBlocking: true})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Query(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLayerEventCreateClose is the streams layer around an event's create and close:
// the context's count, the Event, its use count's close.
func BenchmarkLayerEventCreateClose(b *testing.B) {
	d := newDriver(nullCalls{sim.New()})
	c := primary(b, d, 0)
	env := benchEnv{c: c}
	b.ReportAllocs()
	for b.Loop() {
		if err := goEventCreateClose(env); err != nil {
			b.Fatal(err)
		}
	}
}

// The streams layer allocates nothing around the hot calls, on any machine (nullCalls: the
// driver's own calls allocate nothing either). An event made and closed by one function
// stays on its stack: NewEvent is inlined there, and no method of an event hands it on
// (TestHotPathsDoNotAllocate holds the same on the real driver).
func TestLayerHotPathsDoNotAllocate(t *testing.T) {
	d := newDriver(nullCalls{sim.New()})
	c := primary(t, d, 0)
	env := benchEnv{c: c, a: newStream(t, c, StreamOptions{NonBlocking: true}),
		b: newStream(t, c, StreamOptions{NonBlocking: true}), e: newEvent(t, c, EventOptions{DisableTiming: true})}
	cases := []struct {
		name    string
		op      func(benchEnv) error
		inlined bool // holds only where the compiler inlines (needsInlining)
	}{
		{"record+wait", goRecordWait, false},
		{"query", goQuery, false},
		{"event create+close", goEventCreateClose, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.inlined {
				needsInlining(t)
			}
			require.NoError(t, tc.op(env))
			assert.Zero(t, testing.AllocsPerRun(1000, func() { _ = tc.op(env) }))
		})
	}
}
