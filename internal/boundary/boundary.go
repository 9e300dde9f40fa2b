// Package boundary declares, once, the facts that the Go core, the C object core
// (python/native/core.c) and the Python package (python/streambridge) must agree on: how
// an error crosses into Python, the kinds of object the native module keeps under keys,
// the driver entry points the C core calls directly, and what the special stream handles
// mean. `go generate ./internal/boundary` writes them out for C and Python
// (python/native/tables.h, python/streambridge/_tables.py); TestGeneratedFilesAreCurrent
// fails when either file is stale.
package boundary

//go:generate go run ./gen

import (
	"strings"

	"github.com/streambridge/streambridge/internal/driver"
	"github.com/streambridge/streambridge/internal/sim"
)

// ErrorKind says which Python exception an error becomes. An error crosses the boundary as
// (kind, code, name, message, log) and the exception is made from those in one place
// (core.c, sb_raise); nothing parses a message.
type ErrorKind int

// The kinds, in the order of ErrorKinds.
const (
	KindRuntime        ErrorKind = iota // anything not classified below
	KindCUDA                            // a CUresult other than those below
	KindInvalidHandle                   // CUDA_ERROR_INVALID_HANDLE, or a handle refused before the driver saw it
	KindNoDriver                        // no usable driver (or no NVRTC)
	KindCompile                         // NVRTC refused the source; the log comes along
	KindCapture                         // a call a stream capture forbids: refused before it invalidated the capture, or the driver's refusal (ResultKinds)
	KindDeviceMismatch                  // a stated device disagrees with the handle's
	KindClosed                          // the object was closed
	KindValue                           // an argument out of range
	KindType                            // an argument of the wrong type (a key of another kind of object too)
	KindForked                          // a call in a child made by fork()
	KindInCallback                      // a call from inside a host callback that would enter the driver
)

// ErrorKindInfo is one kind: its name in the generated tables and the Python exception
// class it becomes (defined in python/streambridge/_errors.py, or a builtin).
type ErrorKindInfo struct {
	Name   string
	Python string
}

// ErrorKinds describes every kind, indexed by its ErrorKind.
var ErrorKinds = [...]ErrorKindInfo{
	KindRuntime:        {"runtime", "RuntimeError"},
	KindCUDA:           {"cuda", "CUDAError"},
	KindInvalidHandle:  {"invalid_handle", "InvalidHandleError"},
	KindNoDriver:       {"no_driver", "NoDriverError"},
	KindCompile:        {"compile", "CompileError"},
	KindCapture:        {"capture", "CaptureError"},
	KindDeviceMismatch: {"device_mismatch", "DeviceMismatchError"},
	KindClosed:         {"closed", "ClosedError"},
	KindValue:          {"value", "ValueError"},
	KindType:           {"type", "TypeError"},
	KindForked:         {"forked", "ForkedProcessError"},
	KindInCallback:     {"in_callback", "CallbackReentryError"},
}

// ObjectKind is what the native module keeps under a key (pyshim's table). A key is only
// ever used as the kind it was made for: any other use is a KindType error. Events are not
// among them: the C core makes, owns and destroys Python's events itself.
type ObjectKind int

// The kinds of keyed object, in the order of ObjectKinds. 0 is no object.
const (
	ObjectStream ObjectKind = iota + 1
	ObjectGraph
	ObjectModule
	ObjectKernel
)

// ObjectKinds names each kind, indexed by ObjectKind-1.
var ObjectKinds = []string{"stream", "graph", "module", "kernel"}

// Name is the kind's name, as error messages say it.
func (k ObjectKind) Name() string {
	if k < 1 || int(k) > len(ObjectKinds) {
		return "unknown object"
	}
	return ObjectKinds[k-1]
}

// Conventions: what the special stream handles 0, 1 and 2 mean where a handle came from
// (bridge.Convention has the same values).
const (
	// ConventionRuntime is the CUDA runtime's reading (PyTorch, CuPy, cuda.core,
	// __cuda_stream__): 0 the legacy default stream, 1 cudaStreamLegacy, 2 the per-thread one.
	ConventionRuntime = 0
	// ConventionArrayInterface is the CUDA Array Interface v3 and DLPack reading: 1 the
	// legacy default stream, 2 the per-thread one; 0 is refused as ambiguous.
	ConventionArrayInterface = 1
)

// MaxSpecialStream is the largest special stream handle: 0, 1 and 2 name a context's
// default streams, not stream objects.
const MaxSpecialStream = uint64(driver.StreamPerThread)

// SpecialStreams name what each special handle, 0 to MaxSpecialStream, is under
// ConventionRuntime, for reports (streambridge.explain: _tables.SPECIAL_STREAMS).
var SpecialStreams = []string{
	"the legacy default stream (CUDA runtime's 0)",
	"CU_STREAM_LEGACY, the legacy default stream",
	"CU_STREAM_PER_THREAD, the calling thread's default stream",
}

// EventFlags are the cuEventCreate flags the C core makes events with, by the names it
// uses for them.
var EventFlags = []struct {
	Name string
	Flag uint32
}{
	{"BLOCKING_SYNC", driver.EventBlockingSync},
	{"DISABLE_TIMING", driver.EventDisableTiming},
	{"INTERPROCESS", driver.EventInterprocess},
}

// VouchedEventID is the identity a borrowed event is given where it was taken on its
// wrapper's word, its layout unlearned (streams.Vouched): there is nothing to verify
// before each use. An owned event's identity is 0; a proven one's, what the driver's event
// object holds, which never comes near this.
const VouchedEventID = ^uint64(0)

// What the Go checks (streams.Driver.VerifyStream, VerifyEvent) and the C core's loads
// both say of a borrowed stream or event destroyed since it was wrapped, in Go's verbs (tables.h has them in C's):
// the handle; for a reused address also the identity found there and the one wrapped.
const (
	StreamGoneMessage   = "stream %#x was destroyed (it is no longer a live stream); it was not passed to the driver"
	StreamReusedMessage = "stream %#x was destroyed: its address now names another stream (id %d, not %d); it was not passed to the driver"
	EventGoneMessage    = "event %#x was destroyed (it is no longer a live event); it was not passed to the driver"
	EventReusedMessage  = "event %#x was destroyed: its address now names another event (id %d, not %d); it was not passed to the driver"
)

// cVerbs turns a message's Go verbs into C's, for 64-bit unsigned arguments.
var cVerbs = strings.NewReplacer("%#x", "%#llx", "%d", "%llu")

// Settings are the environment variables the Go core reads (streams.Default, the driver and
// NVRTC loaders, the software driver). Go in an extension module sees the environment the
// process started with, so the Python package hands these over from os.environ.
var Settings = []string{"STREAMBRIDGE_DRIVER", "STREAMBRIDGE_LIBCUDA", "STREAMBRIDGE_LIBNVRTC",
	"STREAMBRIDGE_SIM_DEVICES", sim.LayoutSetting, sim.VersionSetting, driver.LayoutSetting, "CUDA_HOME"}

// StreamFlags are the cuStreamCreateWithPriority flags the C core makes streams with.
var StreamFlags = []struct {
	Name string
	Flag uint32
}{
	{"NON_BLOCKING", driver.StreamNonBlocking},
}

// StreamMemoryFields name the words of driver.StreamMemory as the C core reads them, in the
// order StreamMemoryWords writes them (pyshim.StreamMemory hands them over).
var StreamMemoryFields = []string{"BACK", "CTX", "ID", "WORDS", "OBJ_VIA", "ID_VIA", "LO", "HI"}

// StreamMemoryWords is m as the C core reads it, in the order of StreamMemoryFields.
func StreamMemoryWords(m driver.StreamMemory) []uint64 {
	return []uint64{uint64(m.BackAt), uint64(m.CtxAt), uint64(m.IDAt), uint64(m.Words),
		uint64(int64(m.ObjVia)), uint64(int64(m.IDVia)), uint64(m.Lo), uint64(m.Hi)} // -1: 2^64-1
}

// EventMemoryFields name the words of driver.EventMemory as the C core reads them, in the
// order EventMemoryWords writes them (pyshim.EventMemory hands them over).
var EventMemoryFields = []string{"CTX", "ID", "NEXT", "PREV", "WORDS", "OBJ_VIA", "BACK", "ID_VIA", "LO", "HI"}

// EventMemoryWords is m as the C core reads it, in the order of EventMemoryFields.
func EventMemoryWords(m driver.EventMemory) []uint64 {
	return []uint64{uint64(m.CtxAt), uint64(m.IDAt), uint64(m.NextAt), uint64(m.PrevAt), uint64(m.Words),
		uint64(int64(m.ObjVia)), uint64(int64(m.BackAt)), uint64(int64(m.IDVia)), uint64(m.Lo), uint64(m.Hi)} // -1: 2^64-1
}

// ResultKinds are the CUresults whose errors are not of KindCUDA: the driver's "invalid
// resource handle", and its refusals of what a stream capture forbids (misuse streambridge
// could not refuse first, such as a query of another library's event recorded in a capture
// that goes on): these are CaptureErrors too, with the driver's code. Both cores class a
// result by it (ResultKind; the C core by the generated sb_result_kind).
var ResultKinds = map[driver.Result]ErrorKind{
	driver.ErrorInvalidHandle:      KindInvalidHandle,
	driver.ErrorCaptureUnsupported: KindCapture,
	driver.ErrorCaptureInvalidated: KindCapture,
	driver.ErrorCaptureMerge:       KindCapture,
	driver.ErrorCaptureUnmatched:   KindCapture,
	driver.ErrorCaptureUnjoined:    KindCapture,
	driver.ErrorCaptureIsolation:   KindCapture,
	driver.ErrorCaptureImplicit:    KindCapture,
	driver.ErrorCapturedEvent:      KindCapture,
	driver.ErrorCaptureWrongThread: KindCapture,
}

// ResultKind is the kind of an error the driver answered with r.
func ResultKind(r driver.Result) ErrorKind {
	if k, ok := ResultKinds[r]; ok {
		return k
	}
	return KindCUDA
}

// CoreResults are the CUresults the C core tells apart: a query's "not ready" is an
// answer, not an error, an invalid handle raises InvalidHandleError, the legacy stream's
// "implicit dependency on a capture" (refused while a blocking stream captures) a
// CaptureError, and an invalid value, of an event whose last record was captured, says
// why (CapturedEventHint).
var CoreResults = []driver.Result{driver.ErrorInvalidValue, driver.ErrorInvalidHandle, driver.ErrorNotReady,
	driver.ErrorCaptureImplicit}

// CapturedEventHint is what both cores add to the driver's CUDA_ERROR_INVALID_VALUE of a
// query, a synchronize or a stream's wait of an event whose last record went (or may have
// gone) into a capture: once the capture is over, the driver answers so (H100, H200:
// bench/capture_lifetimes.c, cases 21 and 22).
const CapturedEventHint = "the event's last record was captured into a graph: once the capture is over the driver " +
	"knows no work of it outside the graph; record it on a stream outside a capture to wait for that stream's work"

// EntryNames are the driver entry points the C core calls directly, in the order it keeps
// them (driver.EntryNames: both drivers offer exactly these).
func EntryNames() []string { return driver.EntryNames }
