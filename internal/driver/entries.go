package driver

// EntryPoint is one CUDA driver entry point this project calls: its name in cuda.h, the
// exported symbol that carries the ABI called (the _v2 of cuda.h's #defines), the oldest
// CUDA version with that ABI (1000*major + 10*minor), which is what cuGetProcAddress is
// asked for, the way the CUDA runtime resolves them, and what else is known of it.
type EntryPoint struct {
	Name, Export string
	Version      int
	Flags        EntryFlags
}

// EntryFlags are what is known of an entry point beyond its ABI.
type EntryFlags uint8

const (
	// Optional: a driver older than its version may lack it; what needs it answers
	// ErrorNotSupported there, and MinVersion does not count it.
	Optional EntryFlags = 1 << iota
	// CallsBack: the driver may call back into Go on the calling thread during it (the
	// destructor of a user object whose last reference the call drops: a captured host
	// function's, seen in cuStreamEndCapture on an H100; and, it seems, in a synchronize
	// that sees the last launch of a destroyed executable finish: graph launches racing
	// synchronizes and closes got CUDA_ERROR_UNKNOWN, a result written to a moved stack, in
	// TestSoakRandomCallsWithCloses), so the Go call frame must not be on a stack that the
	// callback may move (internal/cuda's callReentrant; a test holds each call site to this).
	CallsBack
	// CCore: the Python module's C core calls it directly, through API.Entry (EntryNames):
	// calls on stream and event objects, the life of the events and streams the C core owns
	// (made and destroyed there, as CuPy's and cuda.core's are in Cython, with the priority
	// range a new stream's priority is checked against), the current-context calls that
	// give a special handle (0, 1, 2) or a new event or stream its context and read the
	// default device (as cudaGetDevice answers), what ties a host callback captured into a
	// graph to that graph's life (the capture's graph, a user object the graph holds, whose
	// destructor frees the callback), the end of a capture an owned stream's destroy meets,
	// and the exchange of the thread's capture mode around its queries. Also the stream's
	// and the event's synchronize, which the C core no longer calls (it polls: wait.inc):
	// the tests that ask the driver's own answer in a thread's capture mode call them
	// through API.Entry (TestWhatACaptureForbidsOtherThreads, TestEntryPointsOrderWork).
	CCore
)

// EntryPoints is the one table of the driver's entry points this project calls: the real
// driver resolves them (internal/cuda), and the software driver, reporting an older version
// (STREAMBRIDGE_SIM_VERSION), answers as a driver lacking the optional ones newer than it.
var EntryPoints = []EntryPoint{
	{"cuInit", "cuInit", 2000, 0},
	{"cuDriverGetVersion", "cuDriverGetVersion", 2020, 0},
	{"cuGetErrorName", "cuGetErrorName", 6000, 0},
	{"cuGetErrorString", "cuGetErrorString", 6000, 0},
	{"cuDeviceGetCount", "cuDeviceGetCount", 2000, 0},
	{"cuDeviceGet", "cuDeviceGet", 2000, 0},
	{"cuDeviceGetName", "cuDeviceGetName", 2000, 0},
	{"cuDeviceGetAttribute", "cuDeviceGetAttribute", 2000, 0},
	{"cuDeviceGetPCIBusId", "cuDeviceGetPCIBusId", 4010, 0},
	{"cuDeviceGetUuid", "cuDeviceGetUuid_v2", 11040, 0},
	{"cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain", 7000, 0},
	{"cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2", 11000, CallsBack},
	{"cuDevicePrimaryCtxGetState", "cuDevicePrimaryCtxGetState", 7000, 0},
	{"cuCtxGetCurrent", "cuCtxGetCurrent", 4000, CCore},
	{"cuCtxSetCurrent", "cuCtxSetCurrent", 4000, CCore},
	{"cuCtxGetDevice", "cuCtxGetDevice", 2000, CCore},
	{"cuCtxGetStreamPriorityRange", "cuCtxGetStreamPriorityRange", 5050, CCore},
	{"cuStreamCreateWithPriority", "cuStreamCreateWithPriority", 5050, CCore},
	{"cuStreamDestroy", "cuStreamDestroy_v2", 4000, CallsBack | CCore},
	{"cuStreamQuery", "cuStreamQuery", 2000, CCore},
	{"cuStreamSynchronize", "cuStreamSynchronize", 2000, CallsBack | CCore}, // a finished launch's last reference to a user object (below)
	{"cuStreamWaitEvent", "cuStreamWaitEvent", 3020, CCore},
	{"cuStreamGetPriority", "cuStreamGetPriority", 5050, 0},
	{"cuStreamGetFlags", "cuStreamGetFlags", 5050, 0},
	{"cuStreamGetCtx", "cuStreamGetCtx", 9020, 0},
	{"cuStreamGetId", "cuStreamGetId", 12000, 0},
	{"cuThreadExchangeStreamCaptureMode", "cuThreadExchangeStreamCaptureMode", 10010, CCore},
	{"cuLaunchHostFunc", "cuLaunchHostFunc", 10000, CCore},
	{"cuStreamBeginCapture", "cuStreamBeginCapture_v2", 10010, 0},
	{"cuStreamEndCapture", "cuStreamEndCapture", 10000, CallsBack | CCore},
	{"cuStreamIsCapturing", "cuStreamIsCapturing", 10000, 0},
	{"cuStreamGetCaptureInfo", "cuStreamGetCaptureInfo_v2", 11030, CCore},
	{"cuGraphGetNodes", "cuGraphGetNodes", 10000, 0},
	{"cuGraphInstantiateWithFlags", "cuGraphInstantiateWithFlags", 11040, 0},
	{"cuGraphLaunch", "cuGraphLaunch", 10000, 0},
	{"cuGraphUpload", "cuGraphUpload", 11010, 0},
	{"cuGraphExecDestroy", "cuGraphExecDestroy", 10000, CallsBack},
	{"cuGraphDestroy", "cuGraphDestroy", 10000, CallsBack | CCore},
	{"cuUserObjectCreate", "cuUserObjectCreate", 11030, CCore},
	{"cuUserObjectRelease", "cuUserObjectRelease", 11030, CallsBack | CCore},
	{"cuGraphRetainUserObject", "cuGraphRetainUserObject", 11030, CCore},
	{"cuEventCreate", "cuEventCreate", 2000, CCore},
	{"cuEventDestroy", "cuEventDestroy_v2", 4000, CCore},
	{"cuEventRecord", "cuEventRecord", 2000, CCore},
	{"cuEventQuery", "cuEventQuery", 2000, CCore},
	{"cuEventSynchronize", "cuEventSynchronize", 2000, CallsBack | CCore},
	{"cuEventElapsedTime", "cuEventElapsedTime", 2000, CCore},
	{"cuIpcGetEventHandle", "cuIpcGetEventHandle", 4010, CCore},
	{"cuIpcOpenEventHandle", "cuIpcOpenEventHandle", 4010, 0},
	{"cuModuleLoadData", "cuModuleLoadData", 2000, 0},
	{"cuModuleUnload", "cuModuleUnload", 2000, CallsBack}, // synchronizes the context, as cuMemFree
	{"cuModuleGetFunction", "cuModuleGetFunction", 2000, 0},
	{"cuLaunchKernel", "cuLaunchKernel", 4000, CCore},
	{"cuMemAlloc", "cuMemAlloc_v2", 3020, 0},
	{"cuMemFree", "cuMemFree_v2", 3020, CallsBack}, // synchronizes the context (driver.API's MemFree)
	{"cuMemcpyHtoD", "cuMemcpyHtoD_v2", 3020, 0},
	{"cuMemcpyDtoH", "cuMemcpyDtoH_v2", 3020, 0},
	{"cuMemcpyHtoDAsync", "cuMemcpyHtoDAsync_v2", 3020, 0},
	{"cuMemcpyDtoHAsync", "cuMemcpyDtoHAsync_v2", 3020, 0},
	{"cuStreamGetCtx_v2", "cuStreamGetCtx_v2", 12050, Optional},
	{"cuCtxCreate", "cuCtxCreate_v2", 3020, Optional},
	{"cuCtxDestroy", "cuCtxDestroy_v2", 4000, Optional | CallsBack},
	{"cuDeviceGetDevResource", "cuDeviceGetDevResource", 12040, Optional},
	{"cuDevResourceGenerateDesc", "cuDevResourceGenerateDesc", 12040, Optional},
	{"cuGreenCtxCreate", "cuGreenCtxCreate", 12040, Optional},
	{"cuGreenCtxDestroy", "cuGreenCtxDestroy", 12040, Optional | CallsBack},
	{"cuGreenCtxStreamCreate", "cuGreenCtxStreamCreate", 12050, Optional},
	{"cuCtxFromGreenCtx", "cuCtxFromGreenCtx", 12040, Optional},
}

// MinVersion is the oldest CUDA driver streambridge works with: the newest ABI among the
// entry points it needs (EntryPoints, the optional ones aside), so that it is stated once
// and a driver that has them all passes.
var MinVersion = func() int {
	v := 0
	for _, e := range EntryPoints {
		if e.Flags&Optional == 0 {
			v = max(v, e.Version)
		}
	}
	return v
}()

// EntryVersion is the version of the entry point named (as in cuda.h), or 0 for one this
// project does not call.
func EntryVersion(name string) int {
	for _, e := range EntryPoints {
		if e.Name == name {
			return e.Version
		}
	}
	return 0
}
