//go:build amd64

package cuda

import (
	_ "embed"
	"fmt"
	"regexp"
	"runtime"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"

	"github.com/streambridge/streambridge/internal/driver"
)

// More arguments than the call frame holds are refused before the call, as purego's
// SyscallN refuses them, not dropped.
func TestTheCallFrameRefusesTooManyArguments(t *testing.T) {
	var f frame
	assert.PanicsWithValue(t, "streambridge: internal error: a driver call with 12 arguments; the call frame holds 11",
		func() { call(0, make([]uintptr, 12)...) })
	assert.NotPanics(t, func() { f.args(make([]uintptr, 11)) })
}

// The trampoline (call_amd64.s) in order, with C functions standing in for the driver's:
// a context made current around the call, the thread's capture mode relaxed around it and
// put back as the driver gave it, and nothing called after a failed step but the undoing
// of what was done. The frame is on the heap, as callReentrant's, since the stand-ins are
// Go code that may move this goroutine's stack.
func TestTheTrampolineRelaxesTheCaptureModeAroundACall(t *testing.T) {
	var seen []string
	mode, current := uint32(0), uintptr(10) // the thread's capture mode and context
	failExchange := uintptr(0)
	out := func(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }
	stand := map[*uintptr]uintptr{
		&cuThreadExchangeStreamCaptureMode: purego.NewCallback(func(p uintptr) uintptr {
			m := (*uint32)(out(p))
			seen = append(seen, fmt.Sprintf("exchange(%d)", *m))
			if failExchange != 0 {
				return failExchange
			}
			*m, mode = mode, *m
			return 0
		}),
		&cuCtxGetCurrent: purego.NewCallback(func(p uintptr) uintptr {
			*(*uintptr)(out(p)) = current
			return 0
		}),
		&cuCtxSetCurrent: purego.NewCallback(func(c uintptr) uintptr {
			seen = append(seen, fmt.Sprintf("set(%d)", c))
			current = c
			return 0
		}),
	}
	for addr, fn := range stand {
		saved := *addr
		*addr = fn
		t.Cleanup(func() { *addr = saved })
	}
	query := purego.NewCallback(func(h uintptr) uintptr {
		seen = append(seen, fmt.Sprintf("query(%d) in mode %d, context %d", h, mode, current))
		return 600
	})
	relaxedCall := func(ctx uintptr) uintptr {
		f := heapFrames.Get().(*frame) // runtime_cgocall's argument does not escape: &frame{} would not be on the heap
		defer heapFrames.Put(f)
		*f = frame{fn: query, ctx: ctx, relax: 1}
		f.a[0] = 7
		runtime_cgocall(trampolineABI0, unsafe.Pointer(f))
		return f.r
	}

	assert.Equal(t, uintptr(600), relaxedCall(0))
	assert.Equal(t, []string{"exchange(2)", "query(7) in mode 2, context 10", "exchange(0)"}, seen)
	assert.Equal(t, uint32(0), mode, "the thread's mode is put back")

	seen = nil
	assert.Equal(t, uintptr(600), relaxedCall(20))
	assert.Equal(t, []string{"set(20)", "exchange(2)", "query(7) in mode 2, context 20", "exchange(0)", "set(10)"}, seen)
	assert.Equal(t, uintptr(10), current, "the thread's context is put back")

	seen, failExchange = nil, 1
	assert.Equal(t, uintptr(1), relaxedCall(20), "a failed exchange is the call's result")
	assert.Equal(t, []string{"set(20)", "exchange(2)", "set(10)"}, seen, "nothing called after it but the context put back")
	assert.Equal(t, uint32(0), mode)
}

// trampolineSource is call_amd64.s, in the test binary: it runs on machines without the source.
//
//go:embed call_amd64.s
var trampolineSource string

// The offsets call_amd64.s reads the frame at are the frame's.
func TestTheTrampolineReadsTheFrameWhereItIs(t *testing.T) {
	var f frame
	want := map[string]uintptr{
		"F_FN": unsafe.Offsetof(f.fn), "F_R": unsafe.Offsetof(f.r), "F_CTX": unsafe.Offsetof(f.ctx),
		"F_PREV": unsafe.Offsetof(f.prev), "F_FN2": unsafe.Offsetof(f.fn2), "F_B1": unsafe.Offsetof(f.b),
		"F_B2": unsafe.Offsetof(f.b) + 8, "F_B3": unsafe.Offsetof(f.b) + 16, "F_CALLS": unsafe.Offsetof(f.calls),
		"F_RELAX": unsafe.Offsetof(f.relax), "F_MODE": unsafe.Offsetof(f.mode),
	}
	got := map[string]uintptr{}
	for _, m := range regexp.MustCompile(`(?m)^#define (F_\w+) (\d+)$`).FindAllStringSubmatch(trampolineSource, -1) {
		n, _ := strconv.Atoi(m[2])
		got[m[1]] = uintptr(n)
	}
	assert.Equal(t, want, got)
	assert.Equal(t, uintptr(8), unsafe.Offsetof(f.a), "a1 is read at 8(R12)")
}

// What the relaxed exchange around a query costs in Go, in one crossing of the trampoline:
// cuStreamQuery of an idle stream as the driver path makes it (the thread's capture mode
// relaxed around it, so that another thread's global capture is left alone) and bare, in
// alternating blocks of 64, so that the machine's drift (larger than the exchange on the
// hosts tried) falls on both alike. Reported as each one's ns a query and their ratio. On
// the real driver only:
//
//	cuda.test -test.run '^$' -test.bench QueryExchange -test.count 6
func BenchmarkQueryExchange(b *testing.B) {
	d, err := Load()
	if err != nil {
		b.Skipf("SKIP: no real driver: %v", err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ctx, done, ok := device0(d)
	if !ok {
		b.Fatal("device 0's primary context")
	}
	defer done()
	if r := d.CtxSetCurrent(ctx); r != driver.Success {
		b.Fatal(r)
	}
	s, r := d.StreamCreateWithPriority(ctx, driver.StreamNonBlocking, 0)
	if r != driver.Success {
		b.Fatal(r)
	}
	defer d.StreamDestroy(s)
	const block = 64
	var took [2]time.Duration // bare, relaxed
	queries := 0
	for b.Loop() {
		for i, query := range [2]func() uintptr{
			func() uintptr { return call(cuStreamQuery, uintptr(s)) },
			func() uintptr { return callRelaxedIn(0, cuStreamQuery, uintptr(s)) },
		} {
			start := time.Now()
			for range block {
				if r := query(); r != 0 {
					b.Fatal(driver.Result(r))
				}
			}
			took[i] += time.Since(start)
		}
		queries += block
	}
	b.ReportMetric(float64(took[0].Nanoseconds())/float64(queries), "bare-ns/query")
	b.ReportMetric(float64(took[1].Nanoseconds())/float64(queries), "relaxed-ns/query")
	b.ReportMetric(float64(took[1])/float64(took[0]), "relaxed/bare")
}
