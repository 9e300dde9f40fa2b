// Package driver defines what the streams package needs from a CUDA driver: the result
// codes of cuda.h, the handle types, and the API interface that the real driver
// (internal/cuda) and the software driver (internal/sim) both implement.
//
// The interface mirrors the driver API one method per entry point, with plain handles, so
// that the safe layer above it has one code path whichever driver runs underneath.
package driver

import (
	"strconv"
	"sync/atomic"
)

// Result is a CUresult code. Success is 0; every other value is an error.
type Result int32

// Result codes from cuda.h that this project names. Other codes still print, with the
// driver's own name and message where a driver is loaded.
const (
	Success                   Result = 0
	ErrorInvalidValue         Result = 1
	ErrorOutOfMemory          Result = 2
	ErrorNotInitialized       Result = 3
	ErrorDeinitialized        Result = 4
	ErrorStubLibrary          Result = 34
	ErrorNoDevice             Result = 100
	ErrorInvalidDevice        Result = 101
	ErrorInvalidImage         Result = 200
	ErrorInvalidContext       Result = 201
	ErrorMapFailed            Result = 205
	ErrorNoBinaryForGPU       Result = 209
	ErrorInvalidPTX           Result = 218
	ErrorInvalidSource        Result = 300
	ErrorFileNotFound         Result = 301
	ErrorInvalidHandle        Result = 400
	ErrorIllegalState         Result = 401
	ErrorNotFound             Result = 500
	ErrorNotReady             Result = 600
	ErrorIllegalAddress       Result = 700
	ErrorLaunchOutOfResources Result = 701
	ErrorContextIsDestroyed   Result = 709
	ErrorLaunchFailed         Result = 719
	ErrorNotPermitted         Result = 800
	ErrorNotSupported         Result = 801
	ErrorCaptureUnsupported   Result = 900
	ErrorCaptureInvalidated   Result = 901
	ErrorCaptureMerge         Result = 902
	ErrorCaptureUnmatched     Result = 903
	ErrorCaptureUnjoined      Result = 904
	ErrorCaptureIsolation     Result = 905
	ErrorCaptureImplicit      Result = 906
	ErrorCapturedEvent        Result = 907
	ErrorCaptureWrongThread   Result = 908
	ErrorUnknown              Result = 999
)

type resultText struct{ name, message string }

// results holds the names and messages of cuda.h, used when no driver is loaded to ask
// (the software driver, or an error reported before the real one loaded).
var results = map[Result]resultText{
	Success:                   {"CUDA_SUCCESS", "no error"},
	ErrorInvalidValue:         {"CUDA_ERROR_INVALID_VALUE", "invalid argument"},
	ErrorOutOfMemory:          {"CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
	ErrorNotInitialized:       {"CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
	ErrorDeinitialized:        {"CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
	ErrorStubLibrary:          {"CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
	ErrorNoDevice:             {"CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
	ErrorInvalidDevice:        {"CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
	ErrorInvalidImage:         {"CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
	ErrorInvalidContext:       {"CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
	ErrorMapFailed:            {"CUDA_ERROR_MAP_FAILED", "mapping of buffer object failed"},
	ErrorNoBinaryForGPU:       {"CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
	ErrorInvalidPTX:           {"CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
	ErrorInvalidSource:        {"CUDA_ERROR_INVALID_SOURCE", "device kernel image is invalid"},
	ErrorFileNotFound:         {"CUDA_ERROR_FILE_NOT_FOUND", "file not found"},
	ErrorInvalidHandle:        {"CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
	ErrorIllegalState:         {"CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
	ErrorNotFound:             {"CUDA_ERROR_NOT_FOUND", "named symbol not found"},
	ErrorNotReady:             {"CUDA_ERROR_NOT_READY", "device not ready"},
	ErrorIllegalAddress:       {"CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
	ErrorLaunchOutOfResources: {"CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
	ErrorContextIsDestroyed:   {"CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
	ErrorLaunchFailed:         {"CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
	ErrorNotPermitted:         {"CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
	ErrorNotSupported:         {"CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
	ErrorCaptureUnsupported:   {"CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing"},
	ErrorCaptureInvalidated:   {"CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "operation failed due to a previous error during capture"},
	ErrorCaptureMerge:         {"CUDA_ERROR_STREAM_CAPTURE_MERGE", "operation would result in a merge of separate capture sequences"},
	ErrorCaptureUnmatched:     {"CUDA_ERROR_STREAM_CAPTURE_UNMATCHED", "capture was not ended in the same stream as it began"},
	ErrorCaptureUnjoined:      {"CUDA_ERROR_STREAM_CAPTURE_UNJOINED", "capturing stream has unjoined work"},
	ErrorCaptureIsolation:     {"CUDA_ERROR_STREAM_CAPTURE_ISOLATION", "dependency created on uncaptured work in another stream"},
	ErrorCaptureImplicit:      {"CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", "operation would make the legacy stream depend on a capturing blocking stream"},
	ErrorCapturedEvent:        {"CUDA_ERROR_CAPTURED_EVENT", "operation not permitted on an event last recorded in a capturing stream"},
	ErrorCaptureWrongThread:   {"CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", "attempt to terminate a thread-local capture sequence from another thread"},
	ErrorUnknown:              {"CUDA_ERROR_UNKNOWN", "unknown error"},
}

// Describer returns the driver's own name and message for a result code.
type Describer func(Result) (name, message string, ok bool)

var describer atomic.Pointer[Describer]

// SetDescriber installs the loaded driver's cuGetErrorName/cuGetErrorString.
func SetDescriber(d Describer) { describer.Store(&d) }

// Name is the CUDA_ERROR_* name of r.
func (r Result) Name() string {
	name, _ := r.describe()
	return name
}

// Message is the driver's explanation of r.
func (r Result) Message() string {
	_, msg := r.describe()
	return msg
}

func (r Result) describe() (string, string) {
	if d := describer.Load(); d != nil {
		if name, msg, ok := (*d)(r); ok {
			return name, msg
		}
	}
	if t, ok := results[r]; ok {
		return t.name, t.message
	}
	return "CUDA_ERROR_" + strconv.Itoa(int(r)), "unrecognized error code"
}

// Error reads like "CUDA_ERROR_INVALID_HANDLE: invalid resource handle".
func (r Result) Error() string {
	name, msg := r.describe()
	return name + ": " + msg
}
