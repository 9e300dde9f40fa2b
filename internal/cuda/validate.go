package cuda

import (
	"bytes"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/streambridge/streambridge/internal/driver"
)

// The driver dereferences a stream handle, so a garbage integer or a destroyed stream's
// handle kills the process (SIGSEGV, seen on an H200). StreamCheck decides whether an
// integer is a live stream before the driver sees it, reading memory in a way that turns a
// fault into an error (see reader).
//
// What it checks is learned at run time from a stream this package creates, so it follows
// the driver's layout rather than hard-coding it: a handle points to a block whose first
// word points to the stream object (or to a block that points to it: a level of
// indirection more, as another driver may have), and that object holds the handle (a
// back-pointer) and its context, whose first words are a context's header, and its
// identity (what cuStreamGetId returns), there or in a block it points to. On driver 580
// the object holds the handle at word 10, the context at word 2 and the identity at word
// 42, with no indirection more. What is learned is driver.StreamMemory, the one
// description the C core reads by too; the software driver declares its own, and the
// learner is tested there on every layout it has (TestTheLearnerOnEverySimLayout). A
// destroyed stream's block is freed, and the allocator overwrites its first word, so its
// chain no longer leads back to it. The identity is read, not asked for: cuStreamGetId on
// a capturing stream fails (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, in every capture mode,
// seen on an H100) and invalidates the capture, so asking would break a capture another
// library began.
// Where no such layout is found the check refuses every handle it cannot prove.

// streamLayout is the learned description of stream objects (driver.StreamMemory, which the
// C core reads by too): OK once learned and trusted; Lo and Hi are filled where it is
// handed over (Driver.StreamMemory).
type streamLayout driver.StreamMemory

var (
	layoutLearning driver.Learning // layout is set once it is Done
	layout         streamLayout

	// The first two words of every active primary context seen: a candidate's context
	// must start like one. Learned from contexts that are already active, so validation
	// never initializes a GPU; refreshed when a candidate's context is not among them.
	// Read with no lock (every check reads it); replaced whole, under headersMu.
	headersMu sync.Mutex
	headers   atomic.Pointer[map[[2]uint64]bool]
)

// reader reads words of this process's memory that may not be mapped, with no fault
// reaching the process. Go's own SIGSEGV handler turns a fault in Go code into a panic
// under debug.SetPanicOnFault, so plain loads cost nanoseconds; but that holds only while
// Go's handler is the one installed. Embedded in Python, faulthandler.enable() after import
// puts its own in front and a fault would kill the process. So each check first asks the
// kernel who handles SIGSEGV (one rt_sigaction, 160-255 ns on the H200s) and uses loads
// only when it is Go's, else process_vm_readv (EFAULT where a load would fault; ~1.7 us a
// read in gVisor, and a check makes three).
type reader struct{ loads bool }

func newReader() reader { return reader{loads: canLoadUnmapped && goHandlesSIGSEGV()} }

// goHandlesSIGSEGV reports whether the installed SIGSEGV handler is the Go runtime's, or
// one that hands Go's the faults it does not take (ChainsToGo).
func goHandlesSIGSEGV() bool {
	var act struct {
		handler, flags, restorer, mask uintptr
	}
	_, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(unix.SIGSEGV), 0,
		uintptr(unsafe.Pointer(&act)), 8, 0, 0)
	if errno != 0 {
		return false
	}
	if h := chainedSIGSEGV.Load(); h != 0 && act.handler == h {
		return true
	}
	return isGoSigtramp(act.handler)
}

// isGoSigtramp reports whether pc is the Go runtime's signal handler.
func isGoSigtramp(pc uintptr) bool {
	if h := goSigtramp.Load(); h != 0 {
		return pc == h
	}
	fn := runtime.FuncForPC(pc)
	if fn == nil || (fn.Name() != "runtime.sigtramp" && fn.Name() != "runtime.cgoSigtramp") {
		return false
	}
	goSigtramp.Store(pc)
	return true
}

var (
	// goSigtramp is the address of Go's SIGSEGV handler once seen: later checks compare
	// addresses instead of looking the function up.
	goSigtramp atomic.Uintptr
	// chainedSIGSEGV is a handler installed in front of Go's that hands Go's every fault
	// it does not take itself (the Python core's, for its own loads: ChainsToGo).
	chainedSIGSEGV atomic.Uintptr
)

// ChainsToGo is told of a SIGSEGV handler installed in front of whatever was installed
// before it (previous), that hands that one every fault it does not take itself: the
// Python core's, which guards its own loads so (python/native/proof.inc). Where previous
// is Go's handler, the checks keep reading by loads while handler is installed: a fault in
// them still reaches Go's. It reports whether previous is Go's.
func ChainsToGo(handler, previous uintptr) bool {
	if !isGoSigtramp(previous) {
		return false
	}
	chainedSIGSEGV.Store(handler)
	return true
}

// peek reads len(words) words at addr; false where any of it is not mapped readable.
func (r reader) peek(addr uintptr, words []uint64) (ok bool) {
	if r.loads {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer unfault(&ok)
	}
	return r.read(addr, words)
}

// streamChain follows a candidate handle h: the block it points to, the object the block's
// first word leads to (the first len(obj) words of it), the identity, and, where hdr is not
// nil, the first words of the context the object names, into hdr. The reads share one
// fault-protected region: setting it up costs more than the loads (~20 ns a region).
func (r reader) streamChain(h uintptr, l *streamLayout, obj []uint64, hdr *[2]uint64) (ctx uintptr, id uint64, ok bool) {
	if r.loads {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer unfault(&ok)
	}
	var w [1]uint64
	if !r.read(h, w[:]) || (l.ObjVia >= 0 && !r.read(uintptr(w[0])+uintptr(l.ObjVia)*8, w[:])) ||
		!r.read(uintptr(w[0]), obj) || uintptr(obj[l.BackAt]) != h {
		return 0, 0, false
	}
	if id, ok = r.identity(obj, l.IDAt, l.IDVia); !ok {
		return 0, 0, false
	}
	ctx = uintptr(obj[l.CtxAt])
	return ctx, id, hdr == nil || r.read(ctx, hdr[:])
}

// identity is an object's identity, stream's or event's: its word idAt, or, where idVia is
// not -1, word idAt of the block its word idVia points to; false where that is unreadable.
// Inside the caller's fault-protected region.
func (r reader) identity(obj []uint64, idAt, idVia int) (uint64, bool) {
	if idVia < 0 {
		return obj[idAt], true
	}
	var w [1]uint64
	ok := r.read(uintptr(obj[idVia])+uintptr(idAt)*8, w[:])
	return w[0], ok
}

// learnStreams is how many streams learnLayout makes: the identity's place must hold each
// one's own identity, which a word that merely happens to equal one of them would not.
const learnStreams = 3

// unfault, deferred in a region that loads under SetPanicOnFault, turns the panic of a
// fault into ok = false.
func unfault(ok *bool) {
	if recover() != nil {
		*ok = false
	}
}

// read is peek without the protection: loads only inside a protected region.
func (r reader) read(addr uintptr, words []uint64) bool {
	if addr == 0 || addr%8 != 0 {
		return false
	}
	if r.loads {
		for i := range words {
			words[i] = load64(addr + uintptr(i)*8)
		}
		return true
	}
	n := len(words) * 8
	local := []unix.Iovec{{Base: (*byte)(unsafe.Pointer(&words[0]))}}
	local[0].SetLen(n)
	remote := []unix.RemoteIovec{{Base: addr, Len: n}}
	got, err := unix.ProcessVMReadv(os.Getpid(), local, remote, 0)
	return err == nil && got == n
}

const layoutSearchWords = 64

// learnStreamLayout creates streams in device 0's primary context and finds where their
// objects keep the handle, the context and the identity: in the object the handle's block
// points to where it can, else one level of indirection further (the object, or the
// identity, in a block a word points to). A layout is trusted only where every stream read
// the same and streams made other ways read right by it too.
func learnStreamLayout(api driver.API) streamLayout {
	ctx, done, ok := device0(api)
	if !ok {
		return streamLayout{}
	}
	defer done()
	var found map[streamLayout]bool
	for range learnStreams {
		s, r := api.StreamCreateWithPriority(ctx, driver.StreamNonBlocking, 0)
		if r != driver.Success {
			return streamLayout{}
		}
		defer api.StreamDestroy(s)
		id, r := api.StreamGetId(s) // a new stream: not capturing
		if r != driver.Success {
			return streamLayout{}
		}
		here := layoutsOf(uintptr(s), uintptr(ctx), id)
		if found != nil {
			for l := range found {
				if !here[l] {
					delete(found, l)
				}
			}
		} else {
			found = here
		}
	}
	l, ok := simplest(found)
	if !ok {
		return streamLayout{}
	}
	samples, ok := streamsMadeOtherWays(api, ctx)
	defer func() {
		for _, s := range samples {
			api.StreamDestroy(s.h)
		}
	}()
	if !ok || !l.holds(samples) {
		return streamLayout{} // learned from too few: nothing is proven rather than garbage accepted
	}
	l.OK = true
	return l
}

// layoutsOf is every layout by which the stream h, of context ctx and identity id, reads
// right: the object its block's first word points to, else (no word there holds both the
// handle and the context) each object a word of that block points to; the identity in the
// object, else in a block a word of the object points to. Read with process_vm_readv: h is
// known good, and the words followed may be anything.
func layoutsOf(h, ctx uintptr, id uint64) map[streamLayout]bool {
	found := map[streamLayout]bool{}
	rd := reader{}
	var head [1]uint64
	block := make([]uint64, layoutSearchWords)
	if !rd.peek(h, head[:]) || !rd.peek(uintptr(head[0]), block) {
		return found
	}
	objectAt := func(via int, obj []uint64) {
		backs, ctxs := wordsHolding(obj, uint64(h)), wordsHolding(obj, uint64(ctx))
		if len(backs) == 0 || len(ctxs) == 0 {
			return
		}
		type idPlace struct{ via, at int }
		var ids []idPlace
		for _, at := range wordsHolding(obj, id) {
			ids = append(ids, idPlace{-1, at})
		}
		if len(ids) == 0 {
			box := make([]uint64, layoutSearchWords)
			for p, w := range obj {
				if driver.PointerLike(w) && rd.peek(uintptr(w), box) {
					for _, at := range wordsHolding(box, id) {
						ids = append(ids, idPlace{p, at})
					}
				}
			}
		}
		for _, b := range backs {
			for _, c := range ctxs {
				for _, i := range ids {
					m := driver.StreamMemory{BackAt: b, CtxAt: c, IDAt: i.at, ObjVia: via, IDVia: i.via}
					m.Words = m.ObjectWords()
					found[streamLayout(m)] = true
				}
			}
		}
	}
	objectAt(-1, block)
	if len(found) > 0 {
		return found
	}
	obj := make([]uint64, layoutSearchWords)
	for via, w := range block {
		if driver.PointerLike(w) && rd.peek(uintptr(w), obj) {
			objectAt(via, obj)
		}
	}
	return found
}

// wordsHolding is the offsets of words that hold v.
func wordsHolding(words []uint64, v uint64) []int {
	var at []int
	for i, w := range words {
		if w == v {
			at = append(at, i)
		}
	}
	return at
}

// simplest is the layout of found with the fewest levels of indirection, then the lowest
// offsets; false where found is empty.
func simplest(found map[streamLayout]bool) (streamLayout, bool) {
	var best streamLayout
	key := func(l streamLayout) [5]int { return [5]int{l.ObjVia, l.IDVia, l.BackAt, l.CtxAt, l.IDAt} }
	some := false
	for l := range found {
		if k, b := key(l), key(best); !some || slices.Compare(k[:], b[:]) < 0 {
			best, some = l, true
		}
	}
	return best, some
}

// streamSample is a stream the driver made, with the context and identity its object
// must hold.
type streamSample struct {
	h   driver.Stream
	ctx driver.Context
	id  uint64
}

// streamsMadeOtherWays makes the streams a layout learned from plain non-blocking ones must
// also read right before it is trusted: a blocking stream, one of the greatest priority
// (clamped to the device's range), one made on another OS thread (its block may lie in
// that thread's malloc arena), and one in each other device's primary context that is
// active already (none is initialized for this). The caller destroys them.
func streamsMadeOtherWays(api driver.API, ctx driver.Context) ([]streamSample, bool) {
	var samples []streamSample
	add := func(c driver.Context, flags uint32, priority int) bool {
		s, r := api.StreamCreateWithPriority(c, flags, priority)
		if r != driver.Success {
			return false
		}
		id, r := api.StreamGetId(s)
		samples = append(samples, streamSample{s, c, id})
		return r == driver.Success
	}
	ok := add(ctx, 0, 0) && add(ctx, driver.StreamNonBlocking, -1<<20)
	ok = elsewhere(api, ctx, func(c driver.Context) bool { return add(c, driver.StreamNonBlocking, 0) }) && ok
	return samples, ok
}

// elsewhere makes the samples every layout must also read right that differ in where they
// are made, not how: sample(ctx) on another OS thread (its object may lie in that thread's
// malloc arena), and sample(other) in each other device's primary context that is active
// already (none is initialized for this). It reports whether each was made.
func elsewhere(api driver.API, ctx driver.Context, sample func(driver.Context) bool) bool {
	made := make(chan bool)
	go func() { // a goroutine locked to its thread, while the learner's is locked to it: another OS thread
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		made <- sample(ctx)
	}()
	ok := <-made
	eachActivePrimary(api, func(other driver.Context) {
		if other != ctx {
			ok = sample(other) && ok
		}
	})
	return ok
}

// holds reports whether l reads every sample right: its block leads to an object whose
// words at l's offsets hold the sample's handle, context and identity.
func (l *streamLayout) holds(samples []streamSample) bool {
	obj := make([]uint64, l.Words)
	for _, s := range samples {
		ctx, id, ok := (reader{}).streamChain(uintptr(s.h), l, obj, nil) // known good: process_vm_readv will do
		if !ok || driver.Context(ctx) != s.ctx || id != s.id {
			return false
		}
	}
	return true
}

// LetGoAroundWaits hands over an embedder's pair of C functions (driver.LetGoAroundWaits):
// letGo() lets its lock go where the calling thread holds it and returns what
// takeBack(that) needs to take it back. They are called as functions that may call back
// into Go (callReentrant): rare calls, and a test's stand-ins are Go. Given once, before
// the first check.
func LetGoAroundWaits(letGo, takeBack uintptr) {
	driver.LetGoAroundWaits(func() uintptr {
		held, _ := callReentrant(letGo, -1)
		return held
	}, func(held uintptr) { callReentrant(takeBack, -1, held) })
}

// learn runs fn on a locked thread whose capture mode is relaxed
// (cuThreadExchangeStreamCaptureMode), then restores the mode; where driver.LayoutSetting
// says no layout can be learned, it runs nothing. Learning makes and destroys
// streams and events once, at the first check of a foreign handle, and that may come while a
// capture in global mode goes on anywhere in the process (torch's, inside torch.cuda.graph):
// there such calls are refused and the capture invalidated, and the layout would stay
// unlearned for the life of the process. Relaxed, this thread's calls are allowed and touch
// no capture.
func (d *Driver) learn(fn func()) {
	if never, _ := driver.Unlearnable(); never {
		return
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if before, r := d.ThreadExchangeStreamCaptureMode(driver.CaptureModeRelaxed); r == driver.Success {
		defer d.ThreadExchangeStreamCaptureMode(before)
	}
	fn()
}

// device0 retains device 0's primary context, where the layouts are learned; done releases
// it.
func device0(api driver.API) (ctx driver.Context, done func(), ok bool) {
	dev, r := api.DeviceGet(0)
	if r != driver.Success {
		return 0, nil, false
	}
	if ctx, r = api.DevicePrimaryCtxRetain(dev); r != driver.Success {
		return 0, nil, false
	}
	return ctx, func() { api.DevicePrimaryCtxRelease(dev) }, true
}

// eachActivePrimary calls fn with each device's primary context that is active, retained
// for the call (active already: nothing is initialized).
func eachActivePrimary(api driver.API, fn func(driver.Context)) {
	n, r := api.DeviceGetCount()
	if r != driver.Success {
		return
	}
	for i := range n {
		dev, r := api.DeviceGet(i)
		if r != driver.Success {
			continue
		}
		if active, r := api.DevicePrimaryCtxActive(dev); r != driver.Success || !active {
			continue
		}
		if ctx, r := api.DevicePrimaryCtxRetain(dev); r == driver.Success {
			fn(ctx)
			api.DevicePrimaryCtxRelease(dev)
		}
	}
}

// learnHeaders reads the header of every device's primary context that is active.
func (d *Driver) learnHeaders() map[[2]uint64]bool {
	found := map[[2]uint64]bool{}
	eachActivePrimary(d, func(ctx driver.Context) {
		var hdr [2]uint64
		if (reader{}).peek(uintptr(ctx), hdr[:]) && hdr != [2]uint64{} {
			found[hdr] = true
		}
	})
	return found
}

func (d *Driver) knownHeader(hdr [2]uint64) bool {
	if known := headers.Load(); known != nil && (*known)[hdr] {
		return true
	}
	headersMu.Lock()
	defer headersMu.Unlock()
	if known := headers.Load(); known != nil && (*known)[hdr] { // learned meanwhile
		return true
	}
	known := d.learnHeaders()
	headers.Store(&known)
	return known[hdr]
}

// StreamCheck reports whether h is a live stream of this driver, and its context and
// identity (what cuStreamGetCtx and cuStreamGetId would return, read from the stream
// object, so it works on a capturing stream too): driver.Success, or ErrorInvalidHandle
// for anything else; ErrorNotSupported where the driver's layout could not be learned, so
// nothing can be proven. The special handles 0, 1 and 2 are the caller's to judge.
func (d *Driver) StreamCheck(h driver.Stream) (driver.Context, uint64, driver.Result) {
	if h.IsSpecial() {
		return 0, 0, driver.Success
	}
	if !driver.PointerLike(uint64(h)) {
		return 0, 0, driver.ErrorInvalidHandle
	}
	layoutLearning.Do(func() { d.learn(func() { layout = learnStreamLayout(d) }) })
	if !layout.OK {
		return 0, 0, driver.ErrorNotSupported
	}
	var objBuf [layoutSearchWords]uint64
	obj := objBuf[:layout.Words]
	var hdr [2]uint64
	ctx, id, ok := newReader().streamChain(uintptr(h), &layout, obj, &hdr)
	if !ok {
		return 0, 0, driver.ErrorInvalidHandle
	}
	if primary, ok := (*greens.Load())[greenKey{ctx, hdr}]; ok {
		return primary, id, driver.Success
	}
	if d.knownHeader(hdr) {
		return driver.Context(ctx), id, driver.Success
	}
	if layout.ambiguous() { // the chain may be an object's: the driver is not asked about it
		return 0, 0, driver.ErrorInvalidHandle
	}
	c, r := d.otherContext(h, driver.Context(ctx), hdr)
	return c, id, r
}

// ambiguous reports whether l's chain reads the same both ways: the handle in the object's
// first word, as the object is in the block's, so that an object's own address leads back
// to itself through its block (TestOnlyLiveStreamsReadRight found it on such a layout).
// There only a context the check knows tells a stream from its object, so a chain to a
// context it does not know is refused rather than asked about (cuStreamGetCtx_v2 would
// dereference an object's address as a stream's): such a driver's green-context and
// cuCtxCreate streams are then taken only when vouched. Driver 580 keeps the handle at
// word 10.
func (l *streamLayout) ambiguous() bool { return l.BackAt == 0 && l.ObjVia < 0 }

// A stream whose chain leads back to it but whose context is no primary one's is a stream
// of a green context (made from a primary one, sharing its objects) or of a context made
// with cuCtxCreate. The chain proves it a live stream, so the driver may be asked which
// (cuStreamGetCtx_v2, which leaves a capture alone, seen on an H100; once per green
// context: the answer is kept in greens, under the context's address and header, so that
// later checks of its streams ask nothing).
type greenKey struct {
	ctx uintptr
	hdr [2]uint64
}

var greens atomic.Pointer[map[greenKey]driver.Context] // replaced whole, under headersMu

func init() { greens.Store(&map[greenKey]driver.Context{}) }

// otherContext asks the driver about a live stream of a context that is not a primary
// one: a green context's answers the primary context it was made from; another's,
// ErrorInvalidContext with its context. A driver without cuStreamGetCtx_v2 (before 12.5)
// cannot say which a stream is: its answer is ErrorInvalidContext too.
func (d *Driver) otherContext(h driver.Stream, ctx driver.Context, hdr [2]uint64) (driver.Context, driver.Result) {
	primary, green, r := d.StreamGetCtx2(h)
	switch {
	case r == driver.ErrorNotSupported:
		return ctx, driver.ErrorInvalidContext
	case r != driver.Success:
		return 0, driver.ErrorInvalidHandle
	case green == 0 && primary == ctx:
		return ctx, driver.ErrorInvalidContext
	case driver.Context(green) != ctx:
		return 0, driver.ErrorInvalidHandle // the object does not read as the driver says
	}
	var phdr [2]uint64
	if !(reader{}).peek(uintptr(primary), phdr[:]) || !d.knownHeader(phdr) {
		return 0, driver.ErrorInvalidHandle
	}
	headersMu.Lock()
	defer headersMu.Unlock()
	grown := map[greenKey]driver.Context{greenKey{uintptr(ctx), hdr}: primary}
	for k, v := range *greens.Load() {
		grown[k] = v
	}
	greens.Store(&grown)
	return primary, driver.Success
}

// StreamMemory is the learned layout, in the brk heap where the driver keeps its stream
// blocks and objects (seen with streams made by PyTorch, CuPy and cuda.core on an H100,
// driver 580; a stream made on another thread may have its block in that thread's arena,
// outside it). Not OK until a check has learned the layout, or where none was found, or
// the heap's start cannot be read.
func (*Driver) StreamMemory() driver.StreamMemory {
	if !layoutLearning.Done() || !layout.OK {
		return driver.StreamMemory{}
	}
	m := driver.StreamMemory(layout)
	m.Lo, m.OK = heapStart()
	return m
}

// StreamChain reads the stream at h by description m, as a check does (fault-safe: a
// handle that leads to unmapped memory is ok false): the context its object names and its
// identity, where the chain leads back to h. For tests that hold a driver's description to
// its memory.
func StreamChain(h uintptr, m driver.StreamMemory) (ctx uintptr, id uint64, ok bool) {
	if !m.OK || m.Words <= 0 || m.Words > layoutSearchWords {
		return 0, 0, false
	}
	return (reader{}).streamChain(h, (*streamLayout)(&m), make([]uint64, m.Words), nil)
}

// heapStart is where the brk heap begins: field 47 (start_brk) of /proc/self/stat.
func heapStart() (uintptr, bool) {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(stat, ')') // the command name may hold spaces and parentheses
	fields := strings.Fields(string(stat[i+1:]))
	if i < 0 || len(fields) < 45 {
		return 0, false
	}
	v, err := strconv.ParseUint(fields[44], 10, 64) // fields from the third on
	return uintptr(v), err == nil && v != 0
}

// ValidationReads names how a stream check reads memory now: "loads" while Go's SIGSEGV
// handler is the installed one, else "process_vm_readv" (see reader).
func ValidationReads() string {
	if newReader().loads {
		return "loads"
	}
	return "process_vm_readv"
}

// ReadWords reads n words of this process's memory at addr the way a stream check does:
// false, and no fault, where any of it is not mapped readable or addr is not 8-aligned.
// For structures another library hands over by address (a DLPack capsule's tensor), which
// a bad producer can make point anywhere.
func ReadWords(addr uintptr, n int) ([]uint64, bool) {
	if n <= 0 || n > 1024 {
		return nil, false
	}
	words := make([]uint64, n)
	if !newReader().peek(addr, words) {
		return nil, false
	}
	return words, true
}
