// Package bridge turns a stream handle from any framework (PyTorch, CuPy, cuda.core, a CUDA
// Array Interface or DLPack producer, or Go) into a validated, borrowed [streams.Stream] on
// the right device, and orders work between such streams.
//
// The special values 0, 1 and 2 mean different things to different conventions (see
// [Convention]); every other integer must be a live stream, which the streams package
// proves before the driver sees it, so a garbage or freed handle is an error, not a crash.
// The device comes from the handle itself; a device the caller states must agree with it.
package bridge

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/streambridge/streambridge/streams"
)

// Convention says what the special handle values mean where a handle came from.
type Convention int

const (
	// Runtime is the CUDA runtime's reading, which PyTorch, CuPy, cuda.core and the
	// __cuda_stream__ protocol use: 0 is the device's legacy default (NULL) stream, 1 is
	// cudaStreamLegacy and 2 is cudaStreamPerThread.
	Runtime Convention = iota
	// ArrayInterface is the CUDA Array Interface v3 and DLPack reading: 1 is the legacy
	// default stream, 2 the per-thread default stream, and 0 is not allowed, because it is
	// ambiguous between them.
	ArrayInterface
)

func (c Convention) String() string {
	switch c {
	case Runtime:
		return "runtime"
	case ArrayInterface:
		return "array-interface"
	}
	return fmt.Sprintf("Convention(%d)", int(c))
}

// Options say how to read a handle. The zero value reads it under the [Runtime]
// convention, on the device the handle is on (device 0 for the special handles, which name
// no device of their own).
type Options struct {
	// Convention says what the special handles 0, 1 and 2 mean; the zero value is Runtime.
	Convention Convention
	// Device is the device the caller says the stream is on ([OnDevice]), or none (the zero
	// value). For a stream object a stated device is checked against the handle's own; for
	// a special handle it picks the device whose default stream is meant.
	Device DeviceChoice
	// Vouched is the caller's word that a stream object's handle is live and stays so while
	// used (another framework's object kept alive with the stream): see streams.Vouched.
	Vouched bool
}

func (o Options) wrap() []streams.WrapOption {
	if o.Vouched {
		return []streams.WrapOption{streams.Vouched()}
	}
	return nil
}

// DeviceChoice is a device a caller states, made by [OnDevice]; the zero value states none.
type DeviceChoice struct {
	ordinal1 int // the ordinal + 1; 0: none stated
}

// OnDevice states the device of that ordinal. A negative ordinal states none, as -1 does
// for CuPy's device_id.
func OnDevice(ordinal int) DeviceChoice {
	if ordinal < 0 {
		return DeviceChoice{}
	}
	return DeviceChoice{ordinal + 1}
}

// Ordinal is the stated device, and whether one was stated.
func (d DeviceChoice) Ordinal() (int, bool) { return d.ordinal1 - 1, d.ordinal1 != 0 }

// ErrAmbiguousHandle is returned for the handle 0 under [ArrayInterface].
var ErrAmbiguousHandle = errors.New("bridge: stream 0 is ambiguous under the CUDA Array Interface and DLPack (use 1 for the legacy default stream, 2 for the per-thread one)")

// DeviceMismatchError is a stream whose handle is on another device than the caller said.
type DeviceMismatchError struct {
	Handle         uintptr // the stream (or event) handle
	Stated, Actual int     // the device the caller said, and the handle's own
	Event          bool    // the handle is an event's
}

func (e *DeviceMismatchError) Error() string {
	what := "stream"
	if e.Event {
		what = "event"
	}
	return fmt.Sprintf("bridge: %s %#x is on device %d, not device %d as stated", what, e.Handle, e.Actual, e.Stated)
}

// Bridge resolves handles for one driver. It holds a retain of the primary context of
// each device whose default stream it has handed out, released by Close.
type Bridge struct {
	drv *streams.Driver

	mu       sync.Mutex
	contexts map[int]*streams.Context
}

// New returns a Bridge over drv; an error matching streams.ErrNil where drv is nil.
func New(drv *streams.Driver) (*Bridge, error) {
	if drv == nil {
		return nil, fmt.Errorf("%w: bridge.New needs a driver (streams.Default, streams.CUDA or streams.Sim)", streams.ErrNil)
	}
	return &Bridge{drv: drv, contexts: map[int]*streams.Context{}}, nil
}

var (
	defaultOnce    sync.Once
	defaultBridge  *Bridge
	defaultErr     error
	defaultSetting string // STREAMBRIDGE_DRIVER as the first call read it
)

// Default is the process's bridge, over [streams.Default] (STREAMBRIDGE_DRIVER picks the
// real or the software driver). The Python package resolves every handle through it, and so
// does a Go package of your own built into the same extension (see examples/gokernels):
// streams, contexts and validation are then shared with Python. Never closed.
//
// The setting is read once, at the first call: where that call failed and the setting has
// changed since, the error says so, since the failure stays for the process's life.
func Default() (*Bridge, error) {
	defaultOnce.Do(func() {
		defaultSetting = os.Getenv("STREAMBRIDGE_DRIVER")
		var drv *streams.Driver
		drv, defaultErr = streams.Default()
		if defaultErr == nil {
			defaultBridge, defaultErr = New(drv)
		}
	})
	if now := os.Getenv("STREAMBRIDGE_DRIVER"); defaultErr != nil && now != defaultSetting {
		return nil, fmt.Errorf("%w; STREAMBRIDGE_DRIVER is read once, at the first call, and was %q then, %q now: "+
			"set it before the process's first streambridge call (in the environment, or in os.environ before it), "+
			"in a new process", defaultErr, defaultSetting, now)
	}
	return defaultBridge, defaultErr
}

// Driver is the driver the bridge resolves handles for.
func (b *Bridge) Driver() *streams.Driver {
	if b == nil {
		return nil
	}
	return b.drv
}

// valid is streams.ErrNil for a nil or zero Bridge: the first check of each of its methods.
func (b *Bridge) valid() error {
	switch {
	case b == nil:
		return streams.ErrNil
	case b.drv == nil || b.contexts == nil:
		return fmt.Errorf("%w: a zero Bridge has no driver (make one with New)", streams.ErrNil)
	}
	return nil
}

// Stream resolves a handle to a borrowed stream: the stream object it names, found on its
// own device, or the default stream a special value names under opts.Convention. A garbage
// or destroyed handle fails with streams.ErrInvalidHandle, a stated device that disagrees
// with the handle with *DeviceMismatchError.
func (b *Bridge) Stream(handle uintptr, opts Options) (*streams.Stream, error) {
	if err := b.valid(); err != nil {
		return nil, err
	}
	if handle > streams.PerThreadStream {
		s, err := b.drv.WrapStream(handle, opts.wrap()...)
		if err != nil {
			return nil, err
		}
		return s, b.stated(handle, opts, s.Device())
	}
	c, err := b.special(handle, opts)
	if err != nil {
		return nil, err
	}
	return c.WrapStream(handle)
}

// Identity is the device Stream would find for handle, proven the same way, and a stream
// object's identity (cuStreamGetId; 0 for the special handles), keeping nothing: no stream
// is made, nothing is retained beyond what Stream retains. A caller that keeps the handle
// checks it before each use with streams.Driver.VerifyStream.
func (b *Bridge) Identity(handle uintptr, opts Options) (*streams.Device, uint64, error) {
	if err := b.valid(); err != nil {
		return nil, 0, err
	}
	if handle > streams.PerThreadStream {
		dev, id, err := b.drv.StreamIdentity(handle, opts.wrap()...)
		if err != nil {
			return nil, 0, err
		}
		return dev, id, b.stated(handle, opts, dev)
	}
	c, err := b.special(handle, opts)
	if err != nil {
		return nil, 0, err
	}
	return c.Device(), 0, nil
}

// stated checks a stream object's device against the one the caller stated, if any: a
// device the driver does not have is [streams.ErrNoSuchDevice], another one a
// [DeviceMismatchError].
func (b *Bridge) stated(handle uintptr, opts Options, dev *streams.Device) error {
	want, ok := opts.Device.Ordinal()
	if !ok || want == dev.Ordinal() {
		return nil
	}
	if n, err := b.drv.DeviceCount(); err == nil && want >= n {
		return fmt.Errorf("%w: device %d was stated for stream %#x, where the driver has %d (ordinals 0 to %d); the stream is on device %d",
			streams.ErrNoSuchDevice, want, handle, n, n-1, dev.Ordinal())
	}
	return &DeviceMismatchError{Handle: handle, Stated: want, Actual: dev.Ordinal()}
}

// special is the context whose default stream a special handle names under opts.
func (b *Bridge) special(handle uintptr, opts Options) (*streams.Context, error) {
	switch opts.Convention {
	case Runtime:
	case ArrayInterface:
		if handle == 0 {
			return nil, ErrAmbiguousHandle
		}
	default:
		return nil, fmt.Errorf("bridge: unknown convention %d", int(opts.Convention))
	}
	device, _ := opts.Device.Ordinal()
	return b.Context(max(device, 0))
}

// Context returns the primary context of a device, retained by the bridge until Close.
// Streams made in it stay valid that long: releasing a primary context's last retain would
// reset it and destroy them.
func (b *Bridge) Context(device int) (*streams.Context, error) {
	if err := b.valid(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if c, ok := b.contexts[device]; ok {
		return c, nil
	}
	dev, err := b.drv.Device(device)
	if err != nil {
		return nil, err
	}
	c, err := dev.PrimaryContext()
	if err != nil {
		return nil, err
	}
	b.contexts[device] = c
	return c, nil
}

// Order makes work submitted to waiter from now on wait for everything submitted to
// producer so far, whichever frameworks own them: one call into the driver for the record
// and the wait.
func (b *Bridge) Order(waiter, producer *streams.Stream) error {
	if err := b.valid(); err != nil {
		return err
	}
	return waiter.WaitStream(producer)
}

// Close releases the contexts the bridge retained. Streams it returned for special
// handles should not be used after.
func (b *Bridge) Close() error {
	if err := b.valid(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var err error
	for d, c := range b.contexts {
		if e := c.Close(); e != nil {
			err = e
		}
		delete(b.contexts, d)
	}
	return err
}
