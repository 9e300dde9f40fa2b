package cuda

import (
	"slices"

	"github.com/streambridge/streambridge/internal/driver"
)

// Where each entry point of driver.EntryPoints (its name, ABI and version) is kept once
// resolved. The optional ones are 0 where the driver lacks them: what calls one checks it
// first.
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

	// optional (driver.EntryPoint.Optional)
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

var addresses = map[string]*uintptr{
	"cuInit":                            &cuInit,
	"cuDriverGetVersion":                &cuDriverGetVersion,
	"cuGetErrorName":                    &cuGetErrorName,
	"cuGetErrorString":                  &cuGetErrorString,
	"cuDeviceGetCount":                  &cuDeviceGetCount,
	"cuDeviceGet":                       &cuDeviceGet,
	"cuDeviceGetName":                   &cuDeviceGetName,
	"cuDeviceGetAttribute":              &cuDeviceGetAttribute,
	"cuDeviceGetPCIBusId":               &cuDeviceGetPCIBusId,
	"cuDeviceGetUuid":                   &cuDeviceGetUuid,
	"cuDevicePrimaryCtxRetain":          &cuDevicePrimaryCtxRetain,
	"cuDevicePrimaryCtxRelease":         &cuDevicePrimaryCtxRelease,
	"cuDevicePrimaryCtxGetState":        &cuDevicePrimaryCtxGetState,
	"cuCtxGetCurrent":                   &cuCtxGetCurrent,
	"cuCtxSetCurrent":                   &cuCtxSetCurrent,
	"cuCtxGetDevice":                    &cuCtxGetDevice,
	"cuCtxGetStreamPriorityRange":       &cuCtxGetStreamPriorityRange,
	"cuStreamCreateWithPriority":        &cuStreamCreateWithPriority,
	"cuStreamDestroy":                   &cuStreamDestroy,
	"cuStreamQuery":                     &cuStreamQuery,
	"cuStreamSynchronize":               &cuStreamSynchronize,
	"cuStreamWaitEvent":                 &cuStreamWaitEvent,
	"cuStreamGetPriority":               &cuStreamGetPriority,
	"cuStreamGetFlags":                  &cuStreamGetFlags,
	"cuStreamGetCtx":                    &cuStreamGetCtx,
	"cuStreamGetId":                     &cuStreamGetId,
	"cuThreadExchangeStreamCaptureMode": &cuThreadExchangeStreamCaptureMode,
	"cuLaunchHostFunc":                  &cuLaunchHostFunc,
	"cuStreamBeginCapture":              &cuStreamBeginCapture,
	"cuStreamEndCapture":                &cuStreamEndCapture,
	"cuStreamIsCapturing":               &cuStreamIsCapturing,
	"cuStreamGetCaptureInfo":            &cuStreamGetCaptureInfo,
	"cuGraphGetNodes":                   &cuGraphGetNodes,
	"cuGraphInstantiateWithFlags":       &cuGraphInstantiateWithFlags,
	"cuGraphLaunch":                     &cuGraphLaunch,
	"cuGraphUpload":                     &cuGraphUpload,
	"cuGraphExecDestroy":                &cuGraphExecDestroy,
	"cuGraphDestroy":                    &cuGraphDestroy,
	"cuUserObjectCreate":                &cuUserObjectCreate,
	"cuUserObjectRelease":               &cuUserObjectRelease,
	"cuGraphRetainUserObject":           &cuGraphRetainUserObject,
	"cuEventCreate":                     &cuEventCreate,
	"cuEventDestroy":                    &cuEventDestroy,
	"cuEventRecord":                     &cuEventRecord,
	"cuEventQuery":                      &cuEventQuery,
	"cuEventSynchronize":                &cuEventSynchronize,
	"cuEventElapsedTime":                &cuEventElapsedTime,
	"cuIpcGetEventHandle":               &cuIpcGetEventHandle,
	"cuIpcOpenEventHandle":              &cuIpcOpenEventHandle,
	"cuModuleLoadData":                  &cuModuleLoadData,
	"cuModuleUnload":                    &cuModuleUnload,
	"cuModuleGetFunction":               &cuModuleGetFunction,
	"cuLaunchKernel":                    &cuLaunchKernel,
	"cuMemAlloc":                        &cuMemAlloc,
	"cuMemFree":                         &cuMemFree,
	"cuMemcpyHtoD":                      &cuMemcpyHtoD,
	"cuMemcpyDtoH":                      &cuMemcpyDtoH,
	"cuMemcpyHtoDAsync":                 &cuMemcpyHtoDAsync,
	"cuMemcpyDtoHAsync":                 &cuMemcpyDtoHAsync,
	"cuStreamGetCtx_v2":                 &cuStreamGetCtx2,
	"cuCtxCreate":                       &cuCtxCreate,
	"cuCtxDestroy":                      &cuCtxDestroy,
	"cuDeviceGetDevResource":            &cuDeviceGetDevResource,
	"cuDevResourceGenerateDesc":         &cuDevResourceGenerateDesc,
	"cuGreenCtxCreate":                  &cuGreenCtxCreate,
	"cuGreenCtxDestroy":                 &cuGreenCtxDestroy,
	"cuGreenCtxStreamCreate":            &cuGreenCtxStreamCreate,
	"cuCtxFromGreenCtx":                 &cuCtxFromGreenCtx,
}

// Entry is the resolved address of one of driver.EntryNames.
func (*Driver) Entry(name string) uintptr {
	if !slices.Contains(driver.EntryNames, name) {
		return 0
	}
	if addr := addresses[name]; addr != nil {
		return *addr
	}
	return 0
}
