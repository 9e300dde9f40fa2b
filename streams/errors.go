package streams

import (
	"errors"
	"fmt"

	"github.com/streambridge/streambridge/internal/cuda"
	"github.com/streambridge/streambridge/internal/driver"
)

// Result is a CUresult: an error code of the CUDA driver API. Its methods (declared on the
// internal type it names, so go doc does not list them):
//
//   - Error() string reads like "CUDA_ERROR_INVALID_HANDLE: invalid resource handle";
//   - Name() string is the CUDA_ERROR_* name ("CUDA_ERROR_<n>" for a code the driver does
//     not name);
//   - Message() string is the driver's explanation ("invalid resource handle").
type Result = driver.Result

// Sentinel results to test with errors.Is.
const (
	ErrInvalidValue       Result = driver.ErrorInvalidValue
	ErrOutOfMemory        Result = driver.ErrorOutOfMemory
	ErrInvalidDevice      Result = driver.ErrorInvalidDevice
	ErrInvalidContext     Result = driver.ErrorInvalidContext
	ErrInvalidImage       Result = driver.ErrorInvalidImage
	ErrInvalidHandle      Result = driver.ErrorInvalidHandle
	ErrIllegalState       Result = driver.ErrorIllegalState
	ErrNotFound           Result = driver.ErrorNotFound
	ErrNotReady           Result = driver.ErrorNotReady
	ErrNotSupported       Result = driver.ErrorNotSupported
	ErrCaptureUnsupported Result = driver.ErrorCaptureUnsupported
	ErrCaptureInvalidated Result = driver.ErrorCaptureInvalidated
	ErrCaptureUnjoined    Result = driver.ErrorCaptureUnjoined
	ErrCaptureIsolation   Result = driver.ErrorCaptureIsolation
	ErrCapturedEvent      Result = driver.ErrorCapturedEvent
	ErrCaptureWrongThread Result = driver.ErrorCaptureWrongThread
)

// ErrNoDriver is matched (errors.Is) by every error that comes from there being no usable
// CUDA driver on this machine.
var ErrNoDriver = cuda.ErrNoDriver

// ErrClosed is returned by a method called on an object after its Close.
var ErrClosed = errors.New("streambridge: object is closed")

// ErrInHostFunc is returned by every call that would reach the driver made from inside a
// host function, where CUDA forbids CUDA calls: the driver runs host functions one at a
// time, so a wait there for work queued behind a host function never returns. A Close
// there is taken, and its destroy runs on a goroutine of its own.
var ErrInHostFunc = errors.New("streambridge: a call into the CUDA driver from inside a host function, which CUDA forbids (the driver runs host functions one at a time, so a wait there would never return): do the work after the stream's work instead")

// outsideHostFunc is ErrInHostFunc inside a host function, else nil: the first check of
// every call that reaches the driver and takes no use of an object (uses.enter makes it
// for those that do).
func outsideHostFunc() error {
	if driver.InHostFunc() {
		return ErrInHostFunc
	}
	return nil
}

// ErrCapturing is matched (errors.Is) by a call refused because its stream is capturing,
// before the driver, which would refuse it too and invalidate the capture (a graph launch
// on a capturing stream). The capture goes on.
var ErrCapturing = errors.New("not allowed during capture")

// ErrNoSuchDevice is matched (errors.Is) by a device ordinal the driver does not have, as
// is ErrInvalidDevice (cuDeviceGet's answer); the error says how many it has.
var ErrNoSuchDevice = errors.New("streambridge: no such device")

// ErrWrongDevice is matched (errors.Is) by an event recorded on a stream of another device
// than the event's, refused before the driver (which would answer "invalid resource
// handle"); the error names both devices. A wait may cross devices: WaitEvent takes any.
var ErrWrongDevice = errors.New("streambridge: the event and the stream are on different devices")

// ErrWrongThread is returned by a call on a wrapper of the per-thread default stream
// (handle 2) from an OS thread other than the one it was wrapped on: that thread's
// per-thread stream is another stream, and work on it would not be ordered with the rest.
var ErrWrongThread = errors.New("streambridge: per-thread default stream used from another OS thread")

// ErrNil is returned when a nil object is passed where one is needed, or a zero value of
// one of this package's types (a Stream{} this package did not make): methods on either
// return it (or a zero result where they return no error) and never panic.
var ErrNil = errors.New("streambridge: nil object")

// errZero is ErrNil for a zero value of type what, made without this package.
func errZero(what string) error {
	return fmt.Errorf("%w: a zero %s, not one this package made (use its constructor)", ErrNil, what)
}

// ErrWrongDriver is returned when objects of different drivers (the real one and the
// software one) meet in one call: the driver would take the other's handles for its own.
var ErrWrongDriver = errors.New("streambridge: objects belong to different drivers")

// CallError is a driver entry point that failed.
type CallError struct {
	Call   string // the cuda.h name, such as "cuStreamQuery"
	Result Result // what it returned
	Hint   string // what this project knows of the cause, if anything
}

// Error reads like "cuStreamQuery: CUDA_ERROR_INVALID_HANDLE: invalid resource handle".
func (e *CallError) Error() string {
	s := e.Call + ": " + e.Result.Error()
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return s
}

// Unwrap returns the Result, so errors.Is(err, ErrInvalidHandle) and errors.As(err, &r)
// work.
func (e *CallError) Unwrap() error { return e.Result }

// HostFuncPanic is a panic recovered from a host function, handed to the handler set
// with [SetHostFuncPanicHandler]. Its fields (declared on the internal type it names, so
// go doc does not list them): Value any is what was passed to panic, Stack []byte the
// panicking goroutine's stack. Its Error() string says the value.
type HostFuncPanic = driver.HostFuncPanic

// ErrHostFuncGoexit is the Value of the [HostFuncPanic] reported when a host function ends
// its goroutine with runtime.Goexit (t.FailNow, t.Fatal and t.SkipNow do). Host functions
// run on the driver's thread, where Go allows no Goexit: after the report the process ends
// with status 2, on both drivers, rather than crash or leave the stream hanging.
var ErrHostFuncGoexit = driver.ErrGoexit

// SetHostFuncPanicHandler sets what receives panics recovered from host functions (nil:
// print them to standard error). A panic never unwinds into the driver's thread.
func SetHostFuncPanicHandler(h func(error)) { driver.SetPanicHandler(h) }

func (d *Driver) check(call string, r driver.Result) error {
	if r == driver.Success {
		return nil
	}
	e := &CallError{Call: call, Result: r}
	if d.api.Name() == "sim" && r == driver.ErrorNotSupported {
		e.Hint = "the software driver runs no device code"
	}
	return e
}
