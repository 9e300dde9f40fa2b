package driver

import "unsafe"

// Handle types, as in cuda.h. They are addresses or ordinals that only the driver that
// made them understands.
type (
	Device    int32
	Context   uintptr
	Stream    uintptr
	Event     uintptr
	Module    uintptr
	Function  uintptr
	Graph     uintptr
	GraphExec uintptr
	DevicePtr uint64
	// GreenContext is CUgreenCtx: a context with a share of a device's SMs, made from the
	// device's primary context and sharing its objects (modules, events, memory). The
	// real driver's CUcontext for it (cuCtxFromGreenCtx) has the same value.
	GreenContext uintptr
)

// GraphUserObjectMove is cuGraphRetainUserObject's CU_GRAPH_USER_OBJECT_MOVE: the
// references the graph takes are the caller's.
const GraphUserObjectMove = 1

// The special stream handles of the driver API.
const (
	StreamNull      Stream = 0 // the legacy default stream of the current context
	StreamLegacy    Stream = 1 // CU_STREAM_LEGACY
	StreamPerThread Stream = 2 // CU_STREAM_PER_THREAD
)

// IsSpecial reports whether s is one of the handles that name a context's default stream
// rather than a stream object; such handles mean something only with a current context.
func (s Stream) IsSpecial() bool { return s <= StreamPerThread }

// Flags and enumerations from cuda.h.
const (
	StreamDefault     uint32 = 0x0 // CU_STREAM_DEFAULT
	StreamNonBlocking uint32 = 0x1 // CU_STREAM_NON_BLOCKING

	EventDefault       uint32 = 0x0 // CU_EVENT_DEFAULT
	EventBlockingSync  uint32 = 0x1 // CU_EVENT_BLOCKING_SYNC
	EventDisableTiming uint32 = 0x2 // CU_EVENT_DISABLE_TIMING
	EventInterprocess  uint32 = 0x4 // CU_EVENT_INTERPROCESS

	AttrComputeCapabilityMajor int32 = 75 // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
	AttrComputeCapabilityMinor int32 = 76 // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
)

// CaptureMode is CUstreamCaptureMode.
type CaptureMode uint32

const (
	CaptureModeGlobal      CaptureMode = 0
	CaptureModeThreadLocal CaptureMode = 1
	CaptureModeRelaxed     CaptureMode = 2
)

// CaptureStatus is CUstreamCaptureStatus.
type CaptureStatus uint32

const (
	CaptureStatusNone        CaptureStatus = 0
	CaptureStatusActive      CaptureStatus = 1
	CaptureStatusInvalidated CaptureStatus = 2
)

// IPCEventHandle is CUipcEventHandle: 64 opaque bytes.
type IPCEventHandle [64]byte

// API is one CUDA driver. Each method is the cuda.h entry point of the same name, less the
// "cu" prefix, with out-parameters turned into results. Methods marked "current context"
// act on the calling OS thread's current context; the caller locks the thread. Methods
// whose first parameter is a Context c make c current for the call when c is not 0 (and
// restore the thread's own afterwards): the frequent calls, where a separate switch would
// cost more than the call, and where a special stream handle needs a context to mean
// anything.
type API interface {
	// Name says which driver this is: "cuda" or "sim".
	Name() string
	DriverGetVersion() (int, Result)

	DeviceGetCount() (int, Result)
	DeviceGet(ordinal int) (Device, Result)
	DeviceGetName(d Device) (string, Result)
	DeviceGetAttribute(attr int32, d Device) (int, Result)
	DeviceGetPCIBusId(d Device) (string, Result)
	DeviceGetUuid(d Device) ([16]byte, Result)
	DevicePrimaryCtxRetain(d Device) (Context, Result)
	DevicePrimaryCtxRelease(d Device) Result
	DevicePrimaryCtxActive(d Device) (bool, Result) // cuDevicePrimaryCtxGetState's active flag

	// CtxCreate makes a context of its own on d (cuCtxCreate, no flags), not a primary
	// one, and leaves the thread's current context as it was. Such a context shares no
	// objects with the device's primary one: an event of one cannot be recorded on a
	// stream of the other. CtxDestroy destroys it, and everything made in it.
	CtxCreate(d Device) (Context, Result)
	CtxDestroy(c Context) Result
	// GreenCtxCreate makes a green context of all of d's SMs (cuDeviceGetDevResource,
	// cuDevResourceGenerateDesc, cuGreenCtxCreate), which retains d's primary context
	// until GreenCtxDestroy; ErrorNotSupported where the driver has no green contexts.
	GreenCtxCreate(d Device) (GreenContext, Result)
	GreenCtxDestroy(g GreenContext) Result
	// GreenCtxStreamCreate makes a stream of g (flags must hold StreamNonBlocking).
	GreenCtxStreamCreate(g GreenContext, flags uint32, priority int) (Stream, Result)
	CtxFromGreenCtx(g GreenContext) (Context, Result)

	CtxGetCurrent() (Context, Result)
	CtxSetCurrent(c Context) Result
	CtxGetDevice() (Device, Result)                             // current context
	CtxGetStreamPriorityRange() (least, greatest int, r Result) // current context

	StreamCreateWithPriority(c Context, flags uint32, priority int) (Stream, Result)
	StreamDestroy(s Stream) Result
	// Entry is the address of a C function with the signature and meaning of the cuda.h
	// entry point name, for code outside Go that calls the driver itself (the Python
	// binding's most frequent calls); 0 where the driver has none. Only the names in
	// EntryNames are offered.
	Entry(name string) uintptr
	// StreamMemory is where the driver's stream objects are and how they name themselves,
	// for code outside Go that verifies a stream it checked before (the Python core, before
	// each use of a borrowed stream) with plain loads; not OK where it cannot be known.
	StreamMemory() StreamMemory
	// StreamCheck reports whether s is a live stream without letting the driver
	// dereference it if not, and its context and identity (the value cuStreamGetId
	// returns), read without a driver call, so it also works on a capturing stream, where
	// cuStreamGetId fails and invalidates the capture: Success, ErrorInvalidHandle, or
	// ErrorNotSupported where the driver cannot tell. The context of a green context's
	// stream is the primary context it was made from, whose objects it shares. A live
	// stream of a context made otherwise (CtxCreate) answers ErrorInvalidContext, with
	// that context. Special handles are the caller's to judge (Success, context 0,
	// identity 0).
	StreamCheck(s Stream) (Context, uint64, Result)
	// EventMemory is where the driver's event objects are and how they name themselves,
	// as StreamMemory is for streams (the Python core verifies a borrowed event with it).
	EventMemory() EventMemory
	// EventCheck reports whether e is a live event of a device's primary context without
	// letting the driver dereference it if not, and its context and identity (a number
	// the driver gives each event it creates, never reused, read from the event object):
	// Success, ErrorInvalidHandle, or ErrorNotSupported where the driver cannot tell.
	EventCheck(e Event) (Context, uint64, Result)
	// StreamQuery, StreamSynchronize, EventQuery, EventSynchronize,
	// GraphInstantiateWithFlags and GraphExecDestroy run with the calling thread's capture
	// interaction mode relaxed for the call (as if ThreadExchangeStreamCaptureMode wrapped
	// it), so that a capture another thread runs in global mode, this library's or another
	// framework's, or this thread's own in global or thread-local mode, is not invalidated
	// by a call that cannot touch it (and a destroy is not refused, leaking its object).
	// What a capture forbids in any mode is still refused, and still
	// invalidates it: a query or synchronize of the capturing stream itself, or of an event
	// recorded in the capture (seen on an H200, driver 580). The entry points Entry offers
	// (cuStreamQuery, cuStreamSynchronize, cuEventQuery, cuEventSynchronize) are the
	// driver's own, in the thread's mode: the C core relaxes around them itself.
	StreamQuery(c Context, s Stream) Result
	StreamSynchronize(c Context, s Stream) Result
	StreamWaitEvent(c Context, s Stream, e Event, flags uint32) Result
	StreamGetPriority(s Stream) (int, Result)
	StreamGetFlags(s Stream) (uint32, Result)
	StreamGetCtx(s Stream) (Context, Result)
	// StreamGetCtx2 is cuStreamGetCtx_v2: a green context's stream answers the primary
	// context it was made from and the green context; any other stream, its context and 0.
	StreamGetCtx2(s Stream) (Context, GreenContext, Result)
	StreamGetId(s Stream) (uint64, Result)
	// LaunchHostFunc enqueues a call of RunHostFunc(userData) on s.
	LaunchHostFunc(c Context, s Stream, userData uintptr) Result

	StreamBeginCapture(s Stream, mode CaptureMode) Result
	StreamEndCapture(s Stream) (Graph, Result)
	StreamIsCapturing(s Stream) (CaptureStatus, Result)
	StreamGetCaptureInfo(c Context, s Stream) (CaptureStatus, uint64, Result)
	// StreamCaptureGraph is cuStreamGetCaptureInfo's status and, while the capture is
	// active, the graph it captures into (the capture's id not asked).
	StreamCaptureGraph(c Context, s Stream) (CaptureStatus, Graph, Result)
	// HostFuncUserObject is cuUserObjectCreate of an object of one reference whose
	// destructor runs RunHostFunc(key) on a thread of the driver's, maybe inside the call
	// that drops the last reference (CU_USER_OBJECT_NO_DESTRUCTOR_SYNC).
	HostFuncUserObject(key uintptr) (uintptr, Result)
	// GraphRetainUserObject is cuGraphRetainUserObject: g takes count references to obj,
	// the caller's where flags is GraphUserObjectMove. A capture's graph takes them too,
	// and every executable graph made from it holds them until its launches have run.
	GraphRetainUserObject(g Graph, obj uintptr, count int, flags uint32) Result
	// UserObjectRelease is cuUserObjectRelease: count references dropped; the destructor
	// runs once the last is gone.
	UserObjectRelease(obj uintptr, count int) Result
	// ThreadExchangeStreamCaptureMode sets the calling OS thread's capture interaction mode
	// and returns the one it had (global until set): how a capture going on elsewhere
	// treats this thread's potentially unsafe calls (a query, a synchronize). The caller
	// keeps its goroutine locked to the thread while the mode matters.
	ThreadExchangeStreamCaptureMode(mode CaptureMode) (CaptureMode, Result)
	GraphGetNodes(g Graph) (int, Result)
	GraphInstantiateWithFlags(g Graph, flags uint64) (GraphExec, Result)
	GraphLaunch(e GraphExec, s Stream) Result
	GraphUpload(e GraphExec, s Stream) Result
	GraphExecDestroy(e GraphExec) Result
	GraphDestroy(g Graph) Result

	EventCreate(c Context, flags uint32) (Event, Result)
	EventDestroy(e Event) Result
	EventRecord(c Context, e Event, s Stream) Result
	// EventRecordAndWait is cuEventRecord(e, from) then, if it succeeded,
	// cuStreamWaitEvent(to, e, 0), in one call. second reports which call r comes from.
	EventRecordAndWait(c Context, e Event, from, to Stream) (r Result, second bool)
	EventQuery(e Event) Result       // relaxed, as StreamQuery
	EventSynchronize(e Event) Result // relaxed, as StreamQuery
	EventElapsedTime(start, end Event) (float32, Result)
	IpcGetEventHandle(e Event) (IPCEventHandle, Result)  // current context: the event's
	IpcOpenEventHandle(h IPCEventHandle) (Event, Result) // current context

	// ModuleUnload, MemAlloc and MemFree run relaxed, as StreamQuery: in global mode, while
	// another thread captures in global mode, the driver refuses each and invalidates that
	// capture (H200, driver 580: bench/capture_modes.c; cuModuleLoadData and the
	// synchronous copies it allows). ModuleUnload and MemFree synchronize their context
	// first, as cuCtxSynchronize does: they return once every stream of it has run the work
	// enqueued before them, a running or a waiting host function's included; other
	// contexts' work does not hold them (bench/callback_waits.c, part two).
	ModuleLoadData(image unsafe.Pointer) (Module, Result) // current context
	ModuleUnload(m Module) Result
	ModuleGetFunction(m Module, name string) (Function, Result)
	// LaunchKernel is cuLaunchKernel; params points to an array of argument pointers.
	LaunchKernel(c Context, f Function, gridX, gridY, gridZ, blockX, blockY, blockZ, sharedMem uint32,
		s Stream, params unsafe.Pointer) Result

	MemAlloc(bytes uint64) (DevicePtr, Result) // current context
	MemFree(p DevicePtr) Result
	MemcpyHtoD(dst DevicePtr, src unsafe.Pointer, bytes uint64) Result
	MemcpyDtoH(dst unsafe.Pointer, src DevicePtr, bytes uint64) Result
	MemcpyHtoDAsync(dst DevicePtr, src unsafe.Pointer, bytes uint64, s Stream) Result
	MemcpyDtoHAsync(dst unsafe.Pointer, src DevicePtr, bytes uint64, s Stream) Result
}

// StreamMemory describes stream objects in memory: a stream handle points to a block whose
// first word points to the stream object (or, where ObjVia is not -1, to a block whose word
// ObjVia points to it: a level of indirection more), which holds the handle at word BackAt,
// the stream's context (cuStreamGetCtx) at word CtxAt and its identity (cuStreamGetId) at
// word IDAt (or, where IDVia is not -1, its word IDVia points to a block whose word IDAt
// holds the identity); Words reaches the object's words. Blocks and objects lie in
// [Lo, Hi), memory that stays mapped; Hi 0 means up to the program break (the brk heap,
// which only moving the break down unmaps). A destroyed stream's chain no longer leads back
// to its handle with its identity. It is the one description of the proof: the Go check
// (internal/cuda) learns it and reads by it, the software driver declares it, and the C
// core reads by what either hands over.
type StreamMemory struct {
	BackAt, CtxAt, IDAt, Words int
	ObjVia, IDVia              int
	Lo, Hi                     uintptr
	OK                         bool
}

// ObjectWords is the Words that m's offsets need: the object's words up to its handle, its
// context, and its identity or the word that points to the identity's block.
func (m StreamMemory) ObjectWords() int {
	if m.IDVia >= 0 {
		return max(m.BackAt, m.CtxAt, m.IDVia) + 1
	}
	return max(m.BackAt, m.CtxAt, m.IDAt) + 1
}

// EventMemory describes event objects in memory: an event handle points to the event
// object (or, where ObjVia is not -1, to a block whose word ObjVia points to it: a level of
// indirection more, and the object then holds the handle at word BackAt), which holds its
// context at word CtxAt, its identity at word IDAt (or, where IDVia is not -1, its word
// IDVia points to a block whose word IDAt holds the identity), and the objects of the
// events made after and before it in its context at words NextAt and PrevAt (a list: a
// live event's neighbour points back to its object; 0 at either end); Words reaches the
// object's words. Objects lie in [Lo, Hi), as in StreamMemory. A destroyed event is out of
// the list, so no neighbour points back to it, and a new event at its address has another
// identity. Like StreamMemory, the one description of the proof, on both sides.
type EventMemory struct {
	CtxAt, IDAt, NextAt, PrevAt, Words int
	ObjVia, BackAt, IDVia              int
	Lo, Hi                             uintptr
	OK                                 bool
}

// ObjectWords is the Words that m's offsets need: the object's words up to its context,
// its links, its handle where it holds one, and its identity or the word that points to
// the identity's block.
func (m EventMemory) ObjectWords() int {
	id := m.IDAt
	if m.IDVia >= 0 {
		id = m.IDVia
	}
	return max(m.CtxAt, m.NextAt, m.PrevAt, m.BackAt, id) + 1
}

// EntryNames are the entry points API.Entry offers, in the order the C core keeps them
// (internal/boundary generates its table): those EntryPoints flags CCore.
var EntryNames = func() []string {
	var names []string
	for _, e := range EntryPoints {
		if e.Flags&CCore != 0 {
			names = append(names, e.Name)
		}
	}
	return names
}()
