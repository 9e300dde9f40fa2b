package bridge

import (
	"errors"

	"github.com/streambridge/streambridge/internal/boundary"
	"github.com/streambridge/streambridge/streams"
)

// PythonError is how an error crosses into Python: the exception's kind, and the CUDA or
// NVRTC code, its name and the compiler's log where there are. Every error a Go function
// built into streambridge's native module returns (pyshim's, and those of Go packages of
// your own, see examples/gokernels) becomes the typed exception of its kind there
// (InvalidHandleError with .code and .name, DeviceMismatchError, CompileError with .log,
// ...): return errors as they are, wrapped or not; nothing needs encoding.
type PythonError struct {
	Kind boundary.ErrorKind // the exception's class (internal/boundary's ErrorKinds)
	Code int                // the CUresult or nvrtcResult; 0 where the error is not the driver's
	Name string             // the code's CUDA_ERROR_* or NVRTC_ERROR_* name, or empty
	Log  string             // a failed compile's log, or empty
}

// ErrValue marks an argument with a bad value: Python's ValueError.
var ErrValue = errors.New("invalid argument")

// ErrType marks an argument of the wrong type, such as a key of one kind of object used
// as another: Python's TypeError.
var ErrType = errors.New("wrong type")

// ErrCapture marks a call refused because its stream is capturing: Python's CaptureError.
var ErrCapture = streams.ErrCapturing

// DescribeForPython classifies err for Python.
func DescribeForPython(err error) PythonError {
	var r streams.Result
	var mismatch *DeviceMismatchError
	var compile *streams.CompileError
	switch {
	case errors.As(err, &compile):
		name := ""
		if compile.Result == 6 {
			name = "NVRTC_ERROR_COMPILATION"
		}
		return PythonError{Kind: boundary.KindCompile, Code: int(compile.Result), Name: name, Log: compile.Log}
	case errors.Is(err, streams.ErrNoNVRTC):
		return PythonError{Kind: boundary.KindNoDriver}
	case errors.Is(err, streams.ErrNoDriver):
		return PythonError{Kind: boundary.KindNoDriver, Code: 100, Name: "CUDA_ERROR_NO_DEVICE"}
	case errors.As(err, &mismatch):
		return PythonError{Kind: boundary.KindDeviceMismatch}
	case errors.Is(err, ErrCapture):
		return PythonError{Kind: boundary.KindCapture}
	case errors.Is(err, streams.ErrInHostFunc):
		return PythonError{Kind: boundary.KindInCallback}
	case errors.Is(err, ErrAmbiguousHandle), errors.Is(err, ErrValue), errors.Is(err, streams.ErrSetting),
		errors.Is(err, streams.ErrPriority), errors.Is(err, streams.ErrNoSuchDevice):
		return PythonError{Kind: boundary.KindValue}
	case errors.Is(err, ErrType):
		return PythonError{Kind: boundary.KindType}
	case errors.Is(err, streams.ErrClosed):
		return PythonError{Kind: boundary.KindClosed}
	case errors.As(err, &r):
		return PythonError{Kind: boundary.ResultKind(r), Code: int(r), Name: r.Name()}
	}
	return PythonError{Kind: boundary.KindRuntime}
}
