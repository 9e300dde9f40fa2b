package driver

// EntryPoint is one CUDA driver entry point this project calls: its name in cuda.h, the
// exported symbol that carries the ABI called (the _v2 of cuda.h's #defines), and the oldest
// CUDA version with that ABI (1000*major + 10*minor), which is what cuGetProcAddress is
// asked for, the way the CUDA runtime resolves them. An optional one may be missing from a
// driver older than its version: what needs it answers ErrorNotSupported there, and
// MinVersion does not count it.
type EntryPoint struct {
	Name, Export string
	Version      int
	Optional     bool
}

// EntryPoints is the one table of the driver's entry points this project calls: the real
// driver resolves them (internal/cuda), and the software driver, reporting an older version
// (STREAMBRIDGE_SIM_VERSION), answers as a driver lacking the optional ones newer than it.
var EntryPoints = []EntryPoint{
	{"cuInit", "cuInit", 2000, false},
	{"cuDriverGetVersion", "cuDriverGetVersion", 2020, false},
	{"cuGetErrorName", "cuGetErrorName", 6000, false},
	{"cuGetErrorString", "cuGetErrorString", 6000, false},
	{"cuDeviceGetCount", "cuDeviceGetCount", 2000, false},
	{"cuDeviceGet", "cuDeviceGet", 2000, false},
	{"cuDeviceGetName", "cuDeviceGetName", 2000, false},
	{"cuDeviceGetAttribute", "cuDeviceGetAttribute", 2000, false},
	{"cuDeviceGetPCIBusId", "cuDeviceGetPCIBusId", 4010, false},
	{"cuDeviceGetUuid", "cuDeviceGetUuid_v2", 11040, false},
	{"cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain", 7000, false},
	{"cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2", 11000, false},
	{"cuDevicePrimaryCtxGetState", "cuDevicePrimaryCtxGetState", 7000, false},
	{"cuCtxGetCurrent", "cuCtxGetCurrent", 4000, false},
	{"cuCtxSetCurrent", "cuCtxSetCurrent", 4000, false},
	{"cuCtxGetDevice", "cuCtxGetDevice", 2000, false},
	{"cuCtxGetStreamPriorityRange", "cuCtxGetStreamPriorityRange", 5050, false},
	{"cuStreamCreateWithPriority", "cuStreamCreateWithPriority", 5050, false},
	{"cuStreamDestroy", "cuStreamDestroy_v2", 4000, false},
	{"cuStreamQuery", "cuStreamQuery", 2000, false},
	{"cuStreamSynchronize", "cuStreamSynchronize", 2000, false},
	{"cuStreamWaitEvent", "cuStreamWaitEvent", 3020, false},
	{"cuStreamGetPriority", "cuStreamGetPriority", 5050, false},
	{"cuStreamGetFlags", "cuStreamGetFlags", 5050, false},
	{"cuStreamGetCtx", "cuStreamGetCtx", 9020, false},
	{"cuStreamGetId", "cuStreamGetId", 12000, false},
	{"cuThreadExchangeStreamCaptureMode", "cuThreadExchangeStreamCaptureMode", 10010, false},
	{"cuLaunchHostFunc", "cuLaunchHostFunc", 10000, false},
	{"cuStreamBeginCapture", "cuStreamBeginCapture_v2", 10010, false},
	{"cuStreamEndCapture", "cuStreamEndCapture", 10000, false},
	{"cuStreamIsCapturing", "cuStreamIsCapturing", 10000, false},
	{"cuStreamGetCaptureInfo", "cuStreamGetCaptureInfo_v2", 11030, false},
	{"cuGraphGetNodes", "cuGraphGetNodes", 10000, false},
	{"cuGraphInstantiateWithFlags", "cuGraphInstantiateWithFlags", 11040, false},
	{"cuGraphLaunch", "cuGraphLaunch", 10000, false},
	{"cuGraphUpload", "cuGraphUpload", 11010, false},
	{"cuGraphExecDestroy", "cuGraphExecDestroy", 10000, false},
	{"cuGraphDestroy", "cuGraphDestroy", 10000, false},
	{"cuUserObjectCreate", "cuUserObjectCreate", 11030, false},
	{"cuUserObjectRelease", "cuUserObjectRelease", 11030, false},
	{"cuGraphRetainUserObject", "cuGraphRetainUserObject", 11030, false},
	{"cuEventCreate", "cuEventCreate", 2000, false},
	{"cuEventDestroy", "cuEventDestroy_v2", 4000, false},
	{"cuEventRecord", "cuEventRecord", 2000, false},
	{"cuEventQuery", "cuEventQuery", 2000, false},
	{"cuEventSynchronize", "cuEventSynchronize", 2000, false},
	{"cuEventElapsedTime", "cuEventElapsedTime", 2000, false},
	{"cuIpcGetEventHandle", "cuIpcGetEventHandle", 4010, false},
	{"cuIpcOpenEventHandle", "cuIpcOpenEventHandle", 4010, false},
	{"cuModuleLoadData", "cuModuleLoadData", 2000, false},
	{"cuModuleUnload", "cuModuleUnload", 2000, false},
	{"cuModuleGetFunction", "cuModuleGetFunction", 2000, false},
	{"cuLaunchKernel", "cuLaunchKernel", 4000, false},
	{"cuMemAlloc", "cuMemAlloc_v2", 3020, false},
	{"cuMemFree", "cuMemFree_v2", 3020, false},
	{"cuMemcpyHtoD", "cuMemcpyHtoD_v2", 3020, false},
	{"cuMemcpyDtoH", "cuMemcpyDtoH_v2", 3020, false},
	{"cuMemcpyHtoDAsync", "cuMemcpyHtoDAsync_v2", 3020, false},
	{"cuMemcpyDtoHAsync", "cuMemcpyDtoHAsync_v2", 3020, false},
	{"cuStreamGetCtx_v2", "cuStreamGetCtx_v2", 12050, true},
	{"cuCtxCreate", "cuCtxCreate_v2", 3020, true},
	{"cuCtxDestroy", "cuCtxDestroy_v2", 4000, true},
	{"cuDeviceGetDevResource", "cuDeviceGetDevResource", 12040, true},
	{"cuDevResourceGenerateDesc", "cuDevResourceGenerateDesc", 12040, true},
	{"cuGreenCtxCreate", "cuGreenCtxCreate", 12040, true},
	{"cuGreenCtxDestroy", "cuGreenCtxDestroy", 12040, true},
	{"cuGreenCtxStreamCreate", "cuGreenCtxStreamCreate", 12050, true},
	{"cuCtxFromGreenCtx", "cuCtxFromGreenCtx", 12040, true},
}

// MinVersion is the oldest CUDA driver streambridge works with: the newest ABI among the
// entry points it needs (EntryPoints, the optional ones aside), so that it is stated once
// and a driver that has them all passes.
var MinVersion = func() int {
	v := 0
	for _, e := range EntryPoints {
		if !e.Optional {
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
