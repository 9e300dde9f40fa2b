package cuda

import (
	"slices"

	"github.com/streambridge/streambridge/internal/driver"
)

// The one table of driver entry points this project calls. Each is named as in cuda.h,
// with the exported symbol that carries the ABI we call (the _v2 of cuda.h's #defines) and
// the oldest CUDA version with that ABI, which is what cuGetProcAddress is asked for, the
// way the CUDA runtime resolves them.
var (
	cuInit                            uintptr
	cuDriverGetVersion                uintptr
	cuGetErrorName                    uintptr
	cuGetErrorString                  uintptr
	cuDeviceGetCount                  uintptr
	cuDeviceGet                       uintptr
	cuDeviceGetName                   uintptr
	cuDeviceGetAttribute              uintptr
	cuDeviceGetPCIBusId               uintptr
	cuDeviceGetUuid                   uintptr
	cuDevicePrimaryCtxRetain          uintptr
	cuDevicePrimaryCtxRelease         uintptr
	cuDevicePrimaryCtxGetState        uintptr
	cuCtxGetCurrent                   uintptr
	cuCtxSetCurrent                   uintptr
	cuCtxGetDevice                    uintptr
	cuCtxGetStreamPriorityRange       uintptr
	cuStreamCreateWithPriority        uintptr
	cuStreamDestroy                   uintptr
	cuStreamQuery                     uintptr
	cuStreamSynchronize               uintptr
	cuStreamWaitEvent                 uintptr
	cuStreamGetPriority               uintptr
	cuStreamGetFlags                  uintptr
	cuStreamGetCtx                    uintptr
	cuStreamGetId                     uintptr
	cuThreadExchangeStreamCaptureMode uintptr
	cuLaunchHostFunc                  uintptr
	cuStreamBeginCapture              uintptr
	cuStreamEndCapture                uintptr
	cuStreamIsCapturing               uintptr
	cuStreamGetCaptureInfo            uintptr
	cuGraphGetNodes                   uintptr
	cuGraphInstantiateWithFlags       uintptr
	cuGraphLaunch                     uintptr
	cuGraphUpload                     uintptr
	cuGraphExecDestroy                uintptr
	cuGraphDestroy                    uintptr
	cuUserObjectCreate                uintptr
	cuUserObjectRelease               uintptr
	cuGraphRetainUserObject           uintptr
	cuEventCreate                     uintptr
	cuEventDestroy                    uintptr
	cuEventRecord                     uintptr
	cuEventQuery                      uintptr
	cuEventSynchronize                uintptr
	cuEventElapsedTime                uintptr
	cuIpcGetEventHandle               uintptr
	cuIpcOpenEventHandle              uintptr
	cuModuleLoadData                  uintptr
	cuModuleUnload                    uintptr
	cuModuleGetFunction               uintptr
	cuLaunchKernel                    uintptr
	cuMemAlloc                        uintptr
	cuMemFree                         uintptr
	cuMemcpyHtoD                      uintptr
	cuMemcpyDtoH                      uintptr
	cuMemcpyHtoDAsync                 uintptr
	cuMemcpyDtoHAsync                 uintptr

	// Optional: drivers older than their version lack them, and what needs them answers
	// CUDA_ERROR_NOT_SUPPORTED there (MinVersion does not count them).
	cuStreamGetCtx2           uintptr
	cuCtxCreate               uintptr
	cuCtxDestroy              uintptr
	cuDeviceGetDevResource    uintptr
	cuDevResourceGenerateDesc uintptr
	cuGreenCtxCreate          uintptr
	cuGreenCtxDestroy         uintptr
	cuGreenCtxStreamCreate    uintptr
	cuCtxFromGreenCtx         uintptr
)

type symbol struct {
	name    string // as in cuda.h
	export  string // the library's exported symbol with that ABI
	version int    // oldest CUDA version with this ABI (1000*major + 10*minor)
	addr    *uintptr
}

var symbols = []symbol{
	{"cuInit", "cuInit", 2000, &cuInit},
	{"cuDriverGetVersion", "cuDriverGetVersion", 2020, &cuDriverGetVersion},
	{"cuGetErrorName", "cuGetErrorName", 6000, &cuGetErrorName},
	{"cuGetErrorString", "cuGetErrorString", 6000, &cuGetErrorString},
	{"cuDeviceGetCount", "cuDeviceGetCount", 2000, &cuDeviceGetCount},
	{"cuDeviceGet", "cuDeviceGet", 2000, &cuDeviceGet},
	{"cuDeviceGetName", "cuDeviceGetName", 2000, &cuDeviceGetName},
	{"cuDeviceGetAttribute", "cuDeviceGetAttribute", 2000, &cuDeviceGetAttribute},
	{"cuDeviceGetPCIBusId", "cuDeviceGetPCIBusId", 4010, &cuDeviceGetPCIBusId},
	{"cuDeviceGetUuid", "cuDeviceGetUuid_v2", 11040, &cuDeviceGetUuid},
	{"cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain", 7000, &cuDevicePrimaryCtxRetain},
	{"cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2", 11000, &cuDevicePrimaryCtxRelease},
	{"cuDevicePrimaryCtxGetState", "cuDevicePrimaryCtxGetState", 7000, &cuDevicePrimaryCtxGetState},
	{"cuCtxGetCurrent", "cuCtxGetCurrent", 4000, &cuCtxGetCurrent},
	{"cuCtxSetCurrent", "cuCtxSetCurrent", 4000, &cuCtxSetCurrent},
	{"cuCtxGetDevice", "cuCtxGetDevice", 2000, &cuCtxGetDevice},
	{"cuCtxGetStreamPriorityRange", "cuCtxGetStreamPriorityRange", 5050, &cuCtxGetStreamPriorityRange},
	{"cuStreamCreateWithPriority", "cuStreamCreateWithPriority", 5050, &cuStreamCreateWithPriority},
	{"cuStreamDestroy", "cuStreamDestroy_v2", 4000, &cuStreamDestroy},
	{"cuStreamQuery", "cuStreamQuery", 2000, &cuStreamQuery},
	{"cuStreamSynchronize", "cuStreamSynchronize", 2000, &cuStreamSynchronize},
	{"cuStreamWaitEvent", "cuStreamWaitEvent", 3020, &cuStreamWaitEvent},
	{"cuStreamGetPriority", "cuStreamGetPriority", 5050, &cuStreamGetPriority},
	{"cuStreamGetFlags", "cuStreamGetFlags", 5050, &cuStreamGetFlags},
	{"cuStreamGetCtx", "cuStreamGetCtx", 9020, &cuStreamGetCtx},
	{"cuStreamGetId", "cuStreamGetId", 12000, &cuStreamGetId},
	{"cuThreadExchangeStreamCaptureMode", "cuThreadExchangeStreamCaptureMode", 10010, &cuThreadExchangeStreamCaptureMode},
	{"cuLaunchHostFunc", "cuLaunchHostFunc", 10000, &cuLaunchHostFunc},
	{"cuStreamBeginCapture", "cuStreamBeginCapture_v2", 10010, &cuStreamBeginCapture},
	{"cuStreamEndCapture", "cuStreamEndCapture", 10000, &cuStreamEndCapture},
	{"cuStreamIsCapturing", "cuStreamIsCapturing", 10000, &cuStreamIsCapturing},
	{"cuStreamGetCaptureInfo", "cuStreamGetCaptureInfo_v2", 11030, &cuStreamGetCaptureInfo},
	{"cuGraphGetNodes", "cuGraphGetNodes", 10000, &cuGraphGetNodes},
	{"cuGraphInstantiateWithFlags", "cuGraphInstantiateWithFlags", 11040, &cuGraphInstantiateWithFlags},
	{"cuGraphLaunch", "cuGraphLaunch", 10000, &cuGraphLaunch},
	{"cuGraphUpload", "cuGraphUpload", 11010, &cuGraphUpload},
	{"cuGraphExecDestroy", "cuGraphExecDestroy", 10000, &cuGraphExecDestroy},
	{"cuGraphDestroy", "cuGraphDestroy", 10000, &cuGraphDestroy},
	{"cuUserObjectCreate", "cuUserObjectCreate", 11030, &cuUserObjectCreate},
	{"cuUserObjectRelease", "cuUserObjectRelease", 11030, &cuUserObjectRelease},
	{"cuGraphRetainUserObject", "cuGraphRetainUserObject", 11030, &cuGraphRetainUserObject},
	{"cuEventCreate", "cuEventCreate", 2000, &cuEventCreate},
	{"cuEventDestroy", "cuEventDestroy_v2", 4000, &cuEventDestroy},
	{"cuEventRecord", "cuEventRecord", 2000, &cuEventRecord},
	{"cuEventQuery", "cuEventQuery", 2000, &cuEventQuery},
	{"cuEventSynchronize", "cuEventSynchronize", 2000, &cuEventSynchronize},
	{"cuEventElapsedTime", "cuEventElapsedTime", 2000, &cuEventElapsedTime},
	{"cuIpcGetEventHandle", "cuIpcGetEventHandle", 4010, &cuIpcGetEventHandle},
	{"cuIpcOpenEventHandle", "cuIpcOpenEventHandle", 4010, &cuIpcOpenEventHandle},
	{"cuModuleLoadData", "cuModuleLoadData", 2000, &cuModuleLoadData},
	{"cuModuleUnload", "cuModuleUnload", 2000, &cuModuleUnload},
	{"cuModuleGetFunction", "cuModuleGetFunction", 2000, &cuModuleGetFunction},
	{"cuLaunchKernel", "cuLaunchKernel", 4000, &cuLaunchKernel},
	{"cuMemAlloc", "cuMemAlloc_v2", 3020, &cuMemAlloc},
	{"cuMemFree", "cuMemFree_v2", 3020, &cuMemFree},
	{"cuMemcpyHtoD", "cuMemcpyHtoD_v2", 3020, &cuMemcpyHtoD},
	{"cuMemcpyDtoH", "cuMemcpyDtoH_v2", 3020, &cuMemcpyDtoH},
	{"cuMemcpyHtoDAsync", "cuMemcpyHtoDAsync_v2", 3020, &cuMemcpyHtoDAsync},
	{"cuMemcpyDtoHAsync", "cuMemcpyDtoHAsync_v2", 3020, &cuMemcpyDtoHAsync},
}

// optionalSymbols are left 0 where the driver lacks them, rather than refuse the driver:
// what calls one checks it first. MinVersion does not count them.
var optionalSymbols = []symbol{
	{"cuStreamGetCtx_v2", "cuStreamGetCtx_v2", 12050, &cuStreamGetCtx2},
	{"cuCtxCreate", "cuCtxCreate_v2", 3020, &cuCtxCreate},
	{"cuCtxDestroy", "cuCtxDestroy_v2", 4000, &cuCtxDestroy},
	{"cuDeviceGetDevResource", "cuDeviceGetDevResource", 12040, &cuDeviceGetDevResource},
	{"cuDevResourceGenerateDesc", "cuDevResourceGenerateDesc", 12040, &cuDevResourceGenerateDesc},
	{"cuGreenCtxCreate", "cuGreenCtxCreate", 12040, &cuGreenCtxCreate},
	{"cuGreenCtxDestroy", "cuGreenCtxDestroy", 12040, &cuGreenCtxDestroy},
	{"cuGreenCtxStreamCreate", "cuGreenCtxStreamCreate", 12050, &cuGreenCtxStreamCreate},
	{"cuCtxFromGreenCtx", "cuCtxFromGreenCtx", 12040, &cuCtxFromGreenCtx},
}

// Entry is the resolved address of one of driver.EntryNames.
func (*Driver) Entry(name string) uintptr {
	if !slices.Contains(driver.EntryNames, name) {
		return 0
	}
	for _, s := range symbols {
		if s.name == name {
			return *s.addr
		}
	}
	return 0
}
