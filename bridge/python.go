package bridge

import (
	"errors"
	"fmt"

	"github.com/streambridge/streambridge/streams"
)

// PythonError encodes err for the Python package as "kind|code|message", which
// streambridge turns into its typed exceptions (InvalidHandleError, CUDAError with .code,
// DeviceMismatchError, CompileError, ...): return it from a Go function exported to Python
// next to streambridge and called through streambridge.go_function. nil stays nil.
func PythonError(err error) error {
	if err == nil {
		return nil
	}
	var r streams.Result
	var mismatch *DeviceMismatchError
	var compile *streams.CompileError
	kind, code := "error", 0
	switch {
	case errors.As(err, &compile):
		kind, code = "compile", int(compile.Result)
	case errors.Is(err, streams.ErrNoNVRTC):
		kind = "nonvrtc"
	case errors.Is(err, streams.ErrNoDriver):
		kind = "nodriver"
	case errors.As(err, &mismatch):
		kind = "device"
	case errors.Is(err, ErrAmbiguousHandle), errors.Is(err, ErrValue):
		kind = "value"
	case errors.Is(err, streams.ErrClosed):
		kind = "closed"
	case errors.As(err, &r):
		kind, code = "cuda", int(r)
	}
	return fmt.Errorf("%s|%d|%s", kind, code, err.Error())
}

// ErrValue marks an argument with a bad value: Python's ValueError through [PythonError].
var ErrValue = errors.New("invalid argument")
