package streams

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"runtime"
	"unsafe"

	"github.com/streambridge/streambridge/internal/driver"
)

// Module is loaded device code: PTX, cubin or fatbin (cuModuleLoadData). Close unloads it.
type Module struct {
	ctx     *Context
	handle  driver.Module
	uses    uses     // open, and the calls in flight: Close's unload waits for the last (uses.go)
	program *Program // where Context.Compile made it: name expressions to mangled names
}

var (
	elfMagic    = []byte{0x7f, 'E', 'L', 'F'}
	fatbinMagic = []byte{0x50, 0xed, 0x55, 0xba} // 0xba55ed50, little-endian
)

// LoadModule loads PTX text, a cubin or a fatbin into c. PTX is compiled by the driver for
// c's device; a compile error fails with ErrInvalidPTX's code (CUDA_ERROR_INVALID_PTX).
func (c *Context) LoadModule(image []byte) (*Module, error) {
	if len(image) == 0 {
		return nil, fmt.Errorf("streambridge: LoadModule: empty image")
	}
	if !bytes.HasPrefix(image, elfMagic) && !bytes.HasPrefix(image, fatbinMagic) &&
		image[len(image)-1] != 0 {
		image = append(append(make([]byte, 0, len(image)+1), image...), 0) // PTX is a C string
	}
	if err := c.acquire(); err != nil {
		return nil, err
	}
	var m driver.Module
	r := c.do(func() (r driver.Result) {
		m, r = c.api.ModuleLoadData(unsafe.Pointer(&image[0]))
		return r
	})
	runtime.KeepAlive(image)
	if err := c.drv.check("cuModuleLoadData", r); err != nil {
		c.release()
		return nil, err
	}
	return &Module{ctx: c, handle: m}, nil
}

// LoadModuleFile reads a PTX, cubin or fatbin file and loads it as [Context.LoadModule]
// does.
func (c *Context) LoadModuleFile(path string) (*Module, error) {
	image, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return c.LoadModule(image)
}

// Context is the context the module was loaded in; its kernels run there.
func (m *Module) Context() *Context {
	if m == nil {
		return nil
	}
	return m.ctx
}

// Function looks up a kernel by its (mangled) name (cuModuleGetFunction), or, in a module
// from Context.Compile, by one of its name expressions ("scale<float>").
func (m *Module) Function(name string) (*Function, error) {
	if m == nil {
		return nil, ErrNil
	}
	if m.ctx == nil {
		return nil, errZero("Module")
	}
	if err := m.uses.enter(m, goroutine()); err != nil {
		return nil, err
	}
	defer m.uses.leave(m, goroutine())
	symbol := name
	if m.program != nil {
		symbol = m.program.LoweredName(name)
	}
	f, r := m.ctx.api.ModuleGetFunction(m.handle, symbol)
	if err := m.ctx.drv.check("cuModuleGetFunction", r); err != nil {
		return nil, fmt.Errorf("kernel %q: %w", name, err)
	}
	return &Function{module: m, handle: f, name: name}, nil
}

// Close unloads the module (cuModuleUnload). It is idempotent; a call in flight on
// another goroutine (a Launch of one of its kernels) keeps the module until it returns,
// and a graph a launch of its kernels was captured into, until the graph and its
// executables are destroyed.
func (m *Module) Close() error {
	if m == nil {
		return ErrNil
	}
	if m.ctx == nil {
		return errZero("Module")
	}
	_, err := m.uses.close(m)
	return err
}

func (m *Module) destroy() error {
	r := m.ctx.do(func() driver.Result { return m.ctx.api.ModuleUnload(m.handle) })
	err := m.ctx.drv.check("cuModuleUnload", r)
	if e := m.ctx.release(); err == nil {
		err = e
	}
	return err
}

// Function is a kernel of a loaded [Module], valid until the module is closed.
type Function struct {
	module *Module
	handle driver.Function
	name   string
}

// Name is the kernel's name as looked up.
func (f *Function) Name() string {
	if f == nil {
		return ""
	}
	return f.name
}

// Dim3 is a grid or block shape. A zero component counts as 1.
type Dim3 struct {
	X, Y, Z uint32 // the extent along each axis (cuLaunchKernel's gridDimX, ...)
}

func (d Dim3) xyz() (uint32, uint32, uint32) {
	return max(d.X, 1), max(d.Y, 1), max(d.Z, 1)
}

// LaunchConfig is the launch geometry of cuLaunchKernel.
type LaunchConfig struct {
	Grid, Block Dim3   // blocks in the grid, threads in a block
	SharedMem   uint32 // dynamic shared memory, bytes
}

// Args are a kernel's arguments, in order. Build them once and reuse them across launches:
// a launch with reused Args allocates nothing. Each argument is copied at launch, so Args
// may be changed (after Reset) as soon as Launch returns.
type Args struct {
	vals []uint64         // one 8-byte slot per argument, little-endian
	ptrs []unsafe.Pointer // &vals[i], rebuilt at launch
}

// Reset empties a for reuse.
func (a *Args) Reset() *Args {
	if a != nil {
		a.vals = a.vals[:0]
	}
	return a
}

// add appends v; on a nil *Args (an empty list) it returns a new one holding v, so
// `var a *Args; a = a.Int32(1)` builds.
func (a *Args) add(v uint64) *Args {
	if a == nil {
		a = &Args{}
	}
	a.vals = append(a.vals, v)
	return a
}

// Int32 adds an int (a kernel's int parameter).
func (a *Args) Int32(v int32) *Args { return a.add(uint64(uint32(v))) }

// Uint32 adds an unsigned int.
func (a *Args) Uint32(v uint32) *Args { return a.add(uint64(v)) }

// Int64 adds a long long.
func (a *Args) Int64(v int64) *Args { return a.add(uint64(v)) }

// Uint64 adds an unsigned long long.
func (a *Args) Uint64(v uint64) *Args { return a.add(v) }

// Float32 adds a float.
func (a *Args) Float32(v float32) *Args { return a.add(uint64(math.Float32bits(v))) }

// Float64 adds a double.
func (a *Args) Float64(v float64) *Args { return a.add(math.Float64bits(v)) }

// Pointer adds a device pointer.
func (a *Args) Pointer(p DevicePtr) *Args { return a.add(uint64(p)) }

// Len is the number of arguments.
func (a *Args) Len() int {
	if a == nil {
		return 0
	}
	return len(a.vals)
}

func (a *Args) params() unsafe.Pointer {
	if a == nil || len(a.vals) == 0 {
		return nil
	}
	if cap(a.ptrs) < len(a.vals) {
		a.ptrs = make([]unsafe.Pointer, len(a.vals), cap(a.vals))
	}
	a.ptrs = a.ptrs[:len(a.vals)]
	for i := range a.vals {
		a.ptrs[i] = unsafe.Pointer(&a.vals[i])
	}
	return unsafe.Pointer(&a.ptrs[0])
}

// Launch runs the kernel on s (cuLaunchKernel). s must be in the module's context. Captured
// into a graph, whoever captures, the launch keeps the module (see [Module.KeepFor]).
func (f *Function) Launch(s *Stream, cfg LaunchConfig, args *Args) error {
	if f == nil {
		return ErrNil
	}
	if f.module == nil || f.module.ctx == nil {
		return errZero("Function")
	}
	m := f.module
	if err := m.uses.enter(m, goroutine()); err != nil {
		return err
	}
	defer m.uses.leave(m, goroutine())
	c := m.ctx
	if err := s.useWith(c.drv); err != nil {
		return err
	}
	defer s.done()
	if s.ctx.handle != c.handle {
		return fmt.Errorf("streambridge: launch of %s: stream is in context %#x, kernel in %#x",
			f.name, s.ctx.handle, c.handle)
	}
	gx, gy, gz := cfg.Grid.xyz()
	bx, by, bz := cfg.Block.xyz()
	params := args.params()
	lock := c.drv.lockOp(uintptr(s.handle), false) // no capture of ours begins or ends between the question and the launch
	defer c.drv.unlockOp(lock)
	if err := s.keepWhileCapturing(&m.uses, m); err != nil {
		return err
	}
	r := c.api.LaunchKernel(c.handle, f.handle, gx, gy, gz, bx, by, bz, cfg.SharedMem, s.handle, params)
	runtime.KeepAlive(args)
	return c.drv.check("cuLaunchKernel", r)
}

// KeepFor makes graph, a CUgraph a capture is adding to, keep m loaded until the graph and
// every executable graph made from it are destroyed: m's Close meanwhile unloads it only
// then. [Function.Launch] does this itself where its stream captures (whoever began the
// capture); KeepFor is for a launch of one of m's kernels made by other code (the Python
// package's C core). A graph whose kernel node names an unloaded module's function crashed
// the real driver in its instantiation (H200, driver 580). ErrClosed where m is closed.
func (m *Module) KeepFor(graph uintptr) error {
	if m == nil {
		return ErrNil
	}
	if m.ctx == nil {
		return errZero("Module")
	}
	return m.ctx.drv.keepUse(driver.Graph(graph), &m.uses, m)
}

// Handle is the CUfunction.
func (f *Function) Handle() uintptr {
	if f == nil {
		return 0
	}
	return uintptr(f.handle)
}
