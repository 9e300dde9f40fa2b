package cuda

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/streambridge/streambridge/internal/driver"
)

// unmappedAddr is an address no mapping holds: a page at 4 GiB, proven free by mapping it
// with MAP_FIXED_NOREPLACE, then unmapped. A page freed where the kernel places mappings
// (top down, near the others) is soon handed to the next small mmap of the runtime or the
// race detector, which made the tests that read it flaky (about once in 50 runs under
// -race); nothing is placed this low unless asked for.
func unmappedAddr(t *testing.T) uintptr {
	t.Helper()
	const at = 1 << 32
	size := uintptr(unix.Getpagesize())
	p, _, errno := unix.Syscall6(unix.SYS_MMAP, at, size, unix.PROT_NONE,
		unix.MAP_ANON|unix.MAP_PRIVATE|unix.MAP_FIXED_NOREPLACE, ^uintptr(0), 0)
	require.Zero(t, errno, "the page at %#x is taken", at)
	require.Equal(t, uintptr(at), p)
	_, _, errno = unix.Syscall(unix.SYS_MUNMAP, p, size, 0)
	require.Zero(t, errno)
	return p
}

// Both ways of reading memory agree: mapped words come back, and an unmapped, a
// protected or a freed address is false, with no fault reaching the process.
func TestReaderNeverFaults(t *testing.T) {
	page, err := unix.Mmap(-1, 0, 2*unix.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	require.NoError(t, err)
	base := uintptr(unsafe.Pointer(&page[0]))
	*(*uint64)(unsafe.Pointer(&page[8])) = 0xfeedface
	guard := base + uintptr(unix.Getpagesize())
	require.NoError(t, unix.Mprotect(page[unix.Getpagesize():], unix.PROT_NONE))
	gone := unmappedAddr(t)
	defer unix.Munmap(page)

	readers := map[string]reader{"process_vm_readv": {}}
	if canLoadUnmapped {
		require.True(t, goHandlesSIGSEGV(), "a Go test binary's SIGSEGV handler is Go's")
		readers["loads"] = reader{loads: true}
	}
	for name, rd := range readers {
		t.Run(name, func(t *testing.T) {
			var w [2]uint64
			require.True(t, rd.peek(base+8, w[:1]))
			assert.Equal(t, uint64(0xfeedface), w[0])
			assert.False(t, rd.peek(guard-8, w[:2]), "runs into a PROT_NONE page")
			assert.False(t, rd.peek(guard, w[:1]), "PROT_NONE")
			assert.False(t, rd.peek(gone, w[:1]), "unmapped")
			assert.False(t, rd.peek(0, w[:1]), "zero")
			assert.False(t, rd.peek(16, w[:1]), "first page")
			assert.False(t, rd.peek(1<<47-8, w[:1]), "top of user space")
			assert.False(t, rd.peek(base+3, w[:1]), "misaligned")
		})
	}
}

// A handler in front of Go's counts as Go's only where it says it hands Go's the faults it
// does not take (ChainsToGo, as the Python core's does) and what it stands in front of is
// Go's; the checks then go on reading by loads while it is installed.
func TestAHandlerChainedToGosKeepsTheLoads(t *testing.T) {
	var act struct{ handler, flags, restorer, mask uintptr }
	_, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(unix.SIGSEGV), 0, uintptr(unsafe.Pointer(&act)), 8, 0, 0)
	require.Zero(t, errno)
	t.Cleanup(func() { chainedSIGSEGV.Store(0) })
	const elsewhere = 0x1000
	assert.False(t, ChainsToGo(act.handler, elsewhere), "in front of a handler not Go's")
	assert.Zero(t, chainedSIGSEGV.Load())
	assert.True(t, ChainsToGo(elsewhere, act.handler), "in front of Go's")
	assert.Equal(t, uintptr(elsewhere), chainedSIGSEGV.Load())
	assert.True(t, goHandlesSIGSEGV(), "Go's own, installed, still counts")
}

// The kernel question each check asks first (rt_sigaction), and a load under
// SetPanicOnFault, beside one process_vm_readv.
func BenchmarkGoHandlesSIGSEGV(b *testing.B) {
	for b.Loop() {
		goHandlesSIGSEGV()
	}
}

func BenchmarkPeek(b *testing.B) {
	var x [4]uint64
	addr := uintptr(unsafe.Pointer(&x[0]))
	for name, rd := range map[string]reader{"loads": {loads: canLoadUnmapped}, "process_vm_readv": {}} {
		b.Run(name, func(b *testing.B) {
			var w [4]uint64
			for b.Loop() {
				rd.peek(addr, w[:])
			}
		})
	}
}

// fakeStream lays out in Go memory what streamChain follows: a handle block whose first
// word points to an object that holds the handle and a context.
type fakeStream struct {
	block [2]uint64
	obj   [4]uint64
	ctx   [2]uint64
}

var fakeLayout = streamLayout{OK: true, BackAt: 3, CtxAt: 1, IDAt: 2, ObjVia: -1, IDVia: -1, Words: 4}

// fakeStreams keeps every fake on the heap: one the compiler left on a goroutine's stack
// would move when the stack grows, leaving the addresses written into it stale (the test
// failed so about once in 25 runs).
var fakeStreams []*fakeStream

func newFakeStream() *fakeStream {
	f := &fakeStream{ctx: [2]uint64{0xc0ffee, 0xbeef}}
	fakeStreams = append(fakeStreams, f)
	f.block[0] = uint64(uintptr(unsafe.Pointer(&f.obj[0])))
	f.obj[3] = uint64(f.handle())
	f.obj[1] = uint64(uintptr(unsafe.Pointer(&f.ctx[0])))
	return f
}

func (f *fakeStream) handle() uintptr { return uintptr(unsafe.Pointer(&f.block[0])) }

// The chain is followed to the context's header; broken anywhere (a pointer into an
// unmapped page at each link, a handle the object does not point back to), it is false,
// with no fault reaching the process.
func TestStreamChain(t *testing.T) {
	unmapped := unmappedAddr(t)

	readers := map[string]reader{"process_vm_readv": {}}
	if canLoadUnmapped {
		readers["loads"] = reader{loads: true}
	}
	for name, rd := range readers {
		t.Run(name, func(t *testing.T) {
			f := newFakeStream()
			var obj [4]uint64
			var hdr [2]uint64
			ctx, _, ok := rd.streamChain(f.handle(), &fakeLayout, obj[:], &hdr)
			require.True(t, ok)
			assert.Equal(t, uintptr(unsafe.Pointer(&f.ctx[0])), ctx)
			assert.Equal(t, [2]uint64{0xc0ffee, 0xbeef}, hdr)

			_, _, ok = rd.streamChain(unmapped, &fakeLayout, obj[:], new([2]uint64))
			assert.False(t, ok, "the handle unmapped")
			f.block[0] = uint64(unmapped)
			_, _, ok = rd.streamChain(f.handle(), &fakeLayout, obj[:], new([2]uint64))
			assert.False(t, ok, "the object unmapped")
			f = newFakeStream()
			f.obj[1] = uint64(unmapped)
			_, _, ok = rd.streamChain(f.handle(), &fakeLayout, obj[:], new([2]uint64))
			assert.False(t, ok, "the context unmapped")
			f = newFakeStream()
			f.obj[3]++
			_, _, ok = rd.streamChain(f.handle(), &fakeLayout, obj[:], new([2]uint64))
			assert.False(t, ok, "no back-pointer")
		})
	}
}

// A check's three reads in one protected region.
func BenchmarkStreamChain(b *testing.B) {
	f := newFakeStream()
	rd := reader{loads: canLoadUnmapped}
	var obj [4]uint64
	for b.Loop() {
		if _, _, ok := rd.streamChain(f.handle(), &fakeLayout, obj[:], new([2]uint64)); !ok {
			b.Fatal("chain broken")
		}
	}
}

func TestReadWordsRefusesWhatCannotBeRead(t *testing.T) {
	x := [3]uint64{1, 2, 3}
	got, ok := ReadWords(uintptr(unsafe.Pointer(&x[0])), 3)
	require.True(t, ok)
	assert.Equal(t, []uint64{1, 2, 3}, got)
	for _, tc := range []struct {
		name string
		addr uintptr
		n    int
	}{{"zero", 0, 1}, {"first page", 16, 1}, {"misaligned", uintptr(unsafe.Pointer(&x[0])) + 3, 1},
		{"top of user space", 1<<47 - 8, 1}, {"no words", uintptr(unsafe.Pointer(&x[0])), 0}} {
		t.Run(tc.name, func(t *testing.T) {
			_, ok := ReadWords(tc.addr, tc.n)
			assert.False(t, ok)
		})
	}
}

// A learned layout is trusted only where it reads every stream made another way right:
// handle, context and identity, each at its offset. One sample that disagrees in any of
// them, or cannot be read, and it is not.
func TestALayoutHoldsOnlyWhereEverySampleReadsRight(t *testing.T) {
	l := fakeLayout
	sample := func() streamSample {
		f := newFakeStream()
		f.obj[2] = 7 + uint64(len(fakeStreams))
		return streamSample{h: driver.Stream(f.handle()), ctx: driver.Context(f.obj[1]), id: f.obj[2]}
	}
	good := []streamSample{sample(), sample(), sample()}
	assert.True(t, l.holds(good))

	for name, spoil := range map[string]func(*streamSample){
		"another identity":  func(s *streamSample) { s.id++ },
		"another context":   func(s *streamSample) { s.ctx++ },
		"another handle":    func(s *streamSample) { s.h += 8 },
		"an unreadable one": func(s *streamSample) { s.h = driver.Stream(unmappedAddr(t)) },
	} {
		bad := append([]streamSample(nil), good...)
		spoil(&bad[1])
		assert.False(t, l.holds(bad), name)
	}
}

// fakeEventList makes n event objects of context ctx, laid out as eventLayout{CtxAt: 0,
// IDAt: 1, NextAt: 2, PrevAt: 3} and linked in order, with identities 11, 12, ...; kept
// on the heap (fakeEvents) as fakeStreams are.
func fakeEventList(ctx uint64, n int) ([]driver.Event, []*[4]uint64) {
	objs := make([]*[4]uint64, n)
	hs := make([]driver.Event, n)
	for i := range objs {
		objs[i] = &[4]uint64{ctx, 11 + uint64(i)}
		hs[i] = driver.Event(uintptr(unsafe.Pointer(objs[i])))
		if i > 0 {
			objs[i][3] = uint64(hs[i-1])
			objs[i-1][2] = uint64(hs[i])
		}
	}
	fakeEvents = append(fakeEvents, objs...)
	return hs, objs
}

var fakeEvents []*[4]uint64

func TestAnEventLayoutHoldsOnlyWhereEverySampleReadsRight(t *testing.T) {
	l := eventLayout{CtxAt: 0, IDAt: 1, NextAt: 2, PrevAt: 3, Words: 4, ObjVia: -1, BackAt: -1, IDVia: -1}
	const ctx = 0xc0ffee
	hs, _ := fakeEventList(ctx, 3)
	good := []eventSample{{hs[0], ctx}, {hs[1], ctx}, {hs[2], ctx}}
	assert.True(t, l.holds(good))

	alone, _ := fakeEventList(ctx, 1)
	broken, objs := fakeEventList(ctx, 2)
	objs[1][3] = uint64(hs[0]) // its neighbour points elsewhere
	for name, bad := range map[string][]eventSample{
		"another context":    {{hs[0], ctx}, {hs[1], ctx + 1}},
		"in no list":         {{hs[0], ctx}, {alone[0], ctx}},
		"an identity twice":  {{hs[0], ctx}, {hs[0], ctx}},
		"an unreadable one":  {{hs[0], ctx}, {driver.Event(unmappedAddr(t)), ctx}},
		"a broken back link": {{broken[0], ctx}},
	} {
		assert.False(t, l.holds(bad), name)
	}
}
