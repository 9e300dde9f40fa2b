package streams

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"sync"
	"sync/atomic"

	"github.com/streambridge/streambridge/internal/cuda"
	"github.com/streambridge/streambridge/internal/driver"
	"github.com/streambridge/streambridge/internal/plumbing"
	"github.com/streambridge/streambridge/internal/sim"
)

// Driver is one CUDA driver implementation: the real one or the software one.
type Driver struct {
	api driver.API

	// The borrowed contexts met through wrapped handles. Every wrap looks its context up,
	// so it is read with no lock; added to (rarely: once per context) by replacing it
	// whole, under mu.
	contexts atomic.Pointer[map[driver.Context]*Context]

	mu sync.Mutex
	// vouched counts, by handle, the open wrappers taken on their caller's word (Vouched):
	// where the layout cannot be learned, another wrap of such a handle is taken on that
	// word too while one is open (a Go function given, as an integer, a stream that Python
	// wrapped from its framework's object; see foreignContext).
	vouched map[driver.Stream]int
	// ours holds, by handle, the streams this package created and has not yet destroyed: a
	// wrap of one of their handles is tied to it (Stream.owner), so that its owner's Close
	// cannot destroy the handle under a call on the wrapper. oursMu makes a stream's create
	// and its entry here one step, and its entry's removal and its destroy another, so that
	// a wrap (which proves the handle and looks it up under it) never finds a live handle of
	// ours without its owner.
	oursMu sync.Mutex
	ours   map[driver.Stream]*Stream

	// fences holds the handles of the fence events this package made (Stream.Fence), live
	// until destroyed, fenceCount how many: IsFence. (A flag on Event would take its
	// allocation to the next size class.) fenceMade orders a fence's create with another's
	// destroy, so that a fence made at a destroyed fence's address is not forgotten with it.
	fences     sync.Map
	fenceCount atomic.Int64
	fenceMade  sync.Mutex

	// captureMu and stripes are the capture lock (capturelock.go): the real driver crashes
	// or hangs when a capture begins or ends while another thread's call touches a stream
	// or an event (bench/capture_races.c), so every call that hands either to the driver
	// holds one stripe shared (by its handle) while no capture of ours is counted, and
	// captureMu whole while one is; BeginCapture, EndCapture and the end of a capture lost
	// with its stream hold captureMu and every stripe.
	captureMu sync.RWMutex
	stripes   [captureStripes]sync.RWMutex
	// gate is the lock's face to the Python package's C core, whose calls it orders with
	// Go's (driver.CaptureGate): captureMu is held whole only with gate's Owner too.
	gate driver.CaptureGate

	// capturing counts the streams on which a capture begun by BeginCapture may still be
	// going on (Stream.counted): while any, Query and Synchronize first ask whether their
	// stream captures, and refuse (the driver would invalidate the capture). While none, the
	// question costs one atomic load.
	capturing atomic.Int32

	// counting holds those streams by the serial of their capture (Stream.counted), which an
	// event whose last record went into it keeps (Event.capturedIn): a number, where a
	// pointer to the stream, stored atomically, would move every event to the heap.
	// countingMu guards it and serials, the last serial given.
	countingMu sync.Mutex
	counting   map[uint64]*Stream
	serials    uint64
}

func newDriver(api driver.API) *Driver {
	d := &Driver{api: api, vouched: map[driver.Stream]int{}, ours: map[driver.Stream]*Stream{}, counting: map[uint64]*Stream{}}
	d.contexts.Store(&map[driver.Context]*Context{})
	return d
}

var (
	cudaOnce sync.Once
	cudaDrv  *Driver
	cudaErr  error
	simOnce  sync.Once
	simDrv   *Driver
)

// CUDA returns the real driver, loading libcuda.so.1 on first use. Without a usable
// driver the error matches [ErrNoDriver] and says how to go on without one.
func CUDA() (*Driver, error) {
	d, err := loadCUDA()
	if err != nil {
		return nil, fmt.Errorf("%w (no GPU here? streams.Sim() is the software driver: streams, events, callbacks "+
			"and graphs on the CPU, no kernels; Default() takes it where STREAMBRIDGE_DRIVER=sim)", err)
	}
	return d, nil
}

// loadCUDA is CUDA, its error without the hint, which Default gives its own.
func loadCUDA() (*Driver, error) {
	cudaOnce.Do(func() {
		api, err := cuda.Load()
		if err != nil {
			cudaErr = err
			return
		}
		cudaDrv = newDriver(api)
	})
	return cudaDrv, cudaErr
}

// Sim returns the process's software driver. It runs stream, event, host-function,
// capture and graph semantics in Go and no device code: module loads and kernel launches
// fail with [ErrNotSupported].
func Sim() *Driver {
	simOnce.Do(func() { simDrv = newDriver(sim.New()) })
	return simDrv
}

// ErrSetting is matched (errors.Is) by an environment setting with a value this package
// cannot use; the error names the variable and what it takes.
var ErrSetting = errors.New("streambridge: bad setting")

// Default returns the driver STREAMBRIDGE_DRIVER names: "cuda" or unset for the real
// driver, "sim" for the software one, with STREAMBRIDGE_SIM_DEVICES devices (0 to
// sim.MaxDevices; 2 when unset) and its objects laid out as STREAMBRIDGE_SIM_LAYOUT says
// (0 when unset; see sim.Layout). Any other value is an [ErrSetting], as is one of
// STREAMBRIDGE_LAYOUT other than "unlearnable" (a test's: either driver then behaves as one
// whose layout cannot be learned, see [Vouched]). Without a usable real
// driver the error matches [ErrNoDriver] and names STREAMBRIDGE_DRIVER=sim.
func Default() (*Driver, error) {
	if _, err := driver.Unlearnable(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSetting, err)
	}
	switch v := os.Getenv("STREAMBRIDGE_DRIVER"); v {
	case "", "cuda":
		d, err := loadCUDA()
		if err != nil {
			return nil, fmt.Errorf("%w (STREAMBRIDGE_DRIVER=sim selects the software driver: streams, events, "+
				"callbacks and graphs on the CPU, no kernels)", err)
		}
		return d, nil
	case "sim":
		if _, err := sim.DeviceCount(); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrSetting, err)
		}
		if _, err := sim.Layout(); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrSetting, err)
		}
		if _, err := sim.ReportedVersion(); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrSetting, err)
		}
		return Sim(), nil
	default:
		return nil, fmt.Errorf("%w: STREAMBRIDGE_DRIVER=%q: want \"cuda\" (the default) or \"sim\" (the software driver)", ErrSetting, v)
	}
}

// Name is "cuda" for the real driver and "sim" for the software one.
func (d *Driver) Name() string {
	if d.valid() != nil {
		return ""
	}
	return d.api.Name()
}

// valid is ErrNil for a nil or zero Driver (one not from Default, Real or Sim): the first
// check of each of its methods that reaches the driver.
func (d *Driver) valid() error {
	switch {
	case d == nil:
		return ErrNil
	case d.api == nil:
		return errZero("Driver")
	}
	return nil
}

// Version is cuDriverGetVersion: 1000*major + 10*minor.
func (d *Driver) Version() (int, error) {
	if err := d.valid(); err != nil {
		return 0, err
	}
	if err := outsideHostFunc(); err != nil {
		return 0, err
	}
	v, r := d.api.DriverGetVersion()
	return v, d.check("cuDriverGetVersion", r)
}

// DeviceCount is cuDeviceGetCount.
func (d *Driver) DeviceCount() (int, error) {
	if err := d.valid(); err != nil {
		return 0, err
	}
	if err := outsideHostFunc(); err != nil {
		return 0, err
	}
	n, r := d.api.DeviceGetCount()
	return n, d.check("cuDeviceGetCount", r)
}

// Device returns the device with the given ordinal (cuDeviceGet).
func (d *Driver) Device(ordinal int) (*Device, error) {
	if err := d.valid(); err != nil {
		return nil, err
	}
	if err := outsideHostFunc(); err != nil {
		return nil, err
	}
	dev, r := d.api.DeviceGet(ordinal)
	if r == driver.ErrorInvalidDevice { // say how many there are
		if n, err := d.DeviceCount(); err == nil {
			return nil, fmt.Errorf("%w: device %d, where the %s driver has %d (ordinals 0 to %d): %w", ErrNoSuchDevice, ordinal,
				d.Name(), n, n-1, &CallError{Call: "cuDeviceGet", Result: r})
		}
	}
	if err := d.check("cuDeviceGet", r); err != nil {
		return nil, err
	}
	return &Device{drv: d, dev: dev}, nil
}

// borrowedContext returns the Context for a context handle some other code made, so that
// streams wrapped from that context share one.
func (d *Driver) borrowedContext(h driver.Context) (*Context, error) {
	if err := outsideHostFunc(); err != nil {
		return nil, err
	}
	if c, ok := (*d.contexts.Load())[h]; ok {
		return c, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	known := *d.contexts.Load()
	if c, ok := known[h]; ok { // met meanwhile
		return c, nil
	}
	c := &Context{drv: d, api: d.api, handle: h}
	var dev driver.Device
	if err := d.check("cuCtxGetDevice", c.do(func() (r driver.Result) {
		dev, r = d.api.CtxGetDevice()
		return r
	})); err != nil {
		return nil, err
	}
	c.dev = &Device{drv: d, dev: dev}
	grown := make(map[driver.Context]*Context, len(known)+1)
	maps.Copy(grown, known)
	grown[h] = c
	d.contexts.Store(&grown)
	return c, nil
}

// The raw entry points and the memory descriptions are plumbing for the Python module's
// Go side, not this package's API: internal/plumbing hands them over.
func init() {
	plumbing.Register(func(v any) driver.API {
		if d, ok := v.(*Driver); ok && d.valid() == nil {
			return d.api
		}
		return nil
	})
}

// layoutWords says where a stream's words lie, as m describes them.
func layoutWords(m driver.StreamMemory) string {
	object := "the object its block points to"
	if m.ObjVia >= 0 {
		object = fmt.Sprintf("the object one block further (word %d of the block its block points to)", m.ObjVia)
	}
	return fmt.Sprintf("a handle leads to %s, which holds the handle at word %d and the context at word %d; the identity is at %s",
		object, m.BackAt, m.CtxAt, identityWords(m.IDAt, m.IDVia))
}

// identityWords says where an object's identity lies, a stream's or an event's.
func identityWords(idAt, idVia int) string {
	if idVia >= 0 {
		return fmt.Sprintf("word %d of the block the object's word %d points to", idAt, idVia)
	}
	return fmt.Sprintf("word %d", idAt)
}

// eventLayoutWords says where an event's words lie, as m describes them.
func eventLayoutWords(m driver.EventMemory) string {
	object := "the object it points to"
	if m.ObjVia >= 0 {
		object = fmt.Sprintf("the object word %d of its block points to, which holds the handle at word %d", m.ObjVia, m.BackAt)
	}
	return fmt.Sprintf("an event handle leads to %s, whose context is at word %d, whose neighbours in its context's list "+
		"are at words %d and %d, and whose identity is at %s", object, m.CtxAt, m.NextAt, m.PrevAt, identityWords(m.IDAt, m.IDVia))
}

// eventProof says how an event handle is proven, by the event e of this driver's own.
func (d *Driver) eventProof(e *Event) (string, error) {
	switch _, _, r := d.api.EventCheck(e.handle); r {
	case driver.Success:
		return "event handles likewise: " + eventLayoutWords(d.api.EventMemory()), nil
	case driver.ErrorNotSupported:
		return "the driver's event objects are laid out as none this version can learn: an event handle is taken " +
			"only on its caller's word", nil
	default:
		return "", d.check("event check", r)
	}
}

// HandleProof says how this driver proves a foreign stream handle live before the driver
// sees it, and why: proven is true where the layout of its stream objects is learned (a
// handle is proven by reading them); false where it cannot be, and then a handle is taken
// only on its caller's word ([Vouched]). It learns the layout if no check has yet, with
// one stream of its own on device 0; without a device nothing can be learned.
func (d *Driver) HandleProof() (proven bool, why string, err error) {
	n, err := d.DeviceCount()
	if err != nil || n == 0 {
		return false, "no device to learn the layout on", err
	}
	dev, err := d.Device(0)
	if err != nil {
		return false, "", err
	}
	c, err := dev.PrimaryContext()
	if err != nil {
		return false, "", err
	}
	defer c.Close()
	s, err := c.NewStream(StreamOptions{NonBlocking: true})
	if err != nil {
		return false, "", err
	}
	defer s.Close()
	switch _, _, r := d.api.StreamCheck(s.handle); r {
	case driver.Success:
		e, err := c.NewEvent(EventOptions{DisableTiming: true})
		if err != nil {
			return false, "", err
		}
		defer e.Close()
		events, err := d.eventProof(e)
		if err != nil {
			return false, "", err
		}
		return true, "the layout of the driver's stream objects was learned: a handle is proven by reading them; " +
			layoutWords(d.api.StreamMemory()) + "; " + events, nil
	case driver.ErrorNotSupported:
		if never, _ := driver.Unlearnable(); never {
			return false, driver.LayoutSetting + "=unlearnable", nil
		}
		return false, "the driver's stream objects are laid out as none this version can learn", nil
	default:
		return false, "", d.check("stream check", r)
	}
}
