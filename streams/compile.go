package streams

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/streambridge/streambridge/internal/nvrtc"
)

// ErrNoNVRTC is returned (wrapped, with the reason) by Compile where libnvrtc cannot be
// opened. STREAMBRIDGE_LIBNVRTC names the library file to use.
var ErrNoNVRTC = nvrtc.ErrNoNVRTC

// CompileError is a failed NVRTC call. Its fields (declared on the internal type it
// names, so go doc does not list them): Call string is the nvrtc* entry point, Result the
// nvrtcResult (an int32; 6, NVRTC_ERROR_COMPILATION, for a failed compile), and Log string
// the compiler's whole log for a failed compile. Its Error() string reads like
// "nvrtcCompileProgram: NVRTC_ERROR_COMPILATION" followed by the log.
type CompileError = nvrtc.Error

// CompileOptions say how CUDA C++ source is compiled.
type CompileOptions struct {
	// Arch is the target, "sm_90" or "compute_90". Context.Compile defaults it to the
	// context's device; Compile requires it.
	Arch string
	// PTX asks for PTX (which the driver compiles for the device when loading) rather than
	// a cubin for Arch.
	PTX bool
	// IncludePaths become -I options.
	IncludePaths []string
	// Defines become -DNAME=VALUE options (-DNAME where VALUE is empty).
	Defines map[string]string
	// Headers are in-memory headers, by the name #include uses.
	Headers map[string]string
	// NameExpressions are the template instantiations or overloads to keep, such as
	// "scale<float>"; Module.Function and Program.LoweredName take them as names.
	NameExpressions []string
	// Options are more nvcc-style options, as given ("-std=c++17", "--use_fast_math").
	Options []string
	// Name is the program's name in the compiler's log ("program.cu" if empty).
	Name string
}

// Program is compiled device code (NVRTC).
type Program struct {
	Image   []byte // PTX text or a cubin, as LoadModule takes it
	PTX     bool   // Image is PTX text (else a cubin)
	Log     string // the compiler's log: warnings, or empty
	lowered map[string]string
}

// LoweredName is the mangled name a name expression compiled to, or name itself where it
// is not one of the program's name expressions.
func (p *Program) LoweredName(name string) string {
	if p == nil {
		return name
	}
	if l, ok := p.lowered[name]; ok {
		return l
	}
	return name
}

// args are the compiler options opts stand for, in a fixed order.
func (opts CompileOptions) args() []string {
	a := []string{"--gpu-architecture=" + opts.Arch}
	for _, p := range opts.IncludePaths {
		a = append(a, "-I"+p)
	}
	for _, k := range slices.Sorted(maps.Keys(opts.Defines)) {
		if v := opts.Defines[k]; v != "" {
			a = append(a, "-D"+k+"="+v)
		} else {
			a = append(a, "-D"+k)
		}
	}
	return append(a, opts.Options...)
}

// The compile cache: programs by source, options and target. Bounded, crudely: it is
// emptied when it reaches maxCachedPrograms.
const maxCachedPrograms = 256

var (
	cacheMu sync.Mutex
	cache   = map[[32]byte]*Program{}
)

func (opts CompileOptions) key(source string, args []string) [32]byte {
	h := sha256.New()
	write := func(s string) { fmt.Fprintf(h, "%d:%s", len(s), s) }
	write(source)
	write(opts.Name)
	write(fmt.Sprint(opts.PTX))
	for _, a := range args {
		write(a)
	}
	for _, k := range slices.Sorted(maps.Keys(opts.Headers)) {
		write(k)
		write(opts.Headers[k])
	}
	for _, e := range opts.NameExpressions {
		write(e)
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// Compile compiles CUDA C++ source with NVRTC for opts.Arch. Results are cached by source,
// options and target, so compiling the same kernel again costs a hash. A compile error is
// a *CompileError carrying the compiler's log.
func Compile(source string, opts CompileOptions) (*Program, error) {
	if opts.Arch == "" {
		return nil, fmt.Errorf("streambridge: Compile: no target architecture (CompileOptions.Arch, such as sm_90)")
	}
	if !opts.PTX && !strings.HasPrefix(opts.Arch, "sm_") {
		return nil, fmt.Errorf("streambridge: Compile: a cubin needs a real architecture (sm_XY), not %q; set PTX for %q", opts.Arch, opts.Arch)
	}
	args := opts.args()
	key := opts.key(source, args)
	cacheMu.Lock()
	p, ok := cache[key]
	cacheMu.Unlock()
	if ok {
		return p, nil
	}
	out, err := nvrtc.Compile(nvrtc.Input{
		Source: source, Name: opts.Name, Options: args, Headers: opts.Headers,
		NameExpressions: opts.NameExpressions, Cubin: !opts.PTX,
	})
	if err != nil {
		return nil, err
	}
	p = &Program{Image: out.Image, PTX: opts.PTX, Log: out.Log, lowered: out.Lowered}
	cacheMu.Lock()
	if len(cache) >= maxCachedPrograms {
		clear(cache)
	}
	cache[key] = p
	cacheMu.Unlock()
	return p, nil
}

// Arch is the device's compute capability as NVRTC names it: "sm_90" (or "compute_90"
// for PTX). The software driver's devices run no device code and have none: an error
// matching [ErrNotSupported], before NVRTC is asked for an architecture that is not one.
func (d *Device) Arch(ptx bool) (string, error) {
	if err := d.valid(); err != nil {
		return "", err
	}
	major, minor, err := d.ComputeCapability()
	if err != nil {
		return "", err
	}
	if major == 0 {
		return "", fmt.Errorf("streambridge: device %d runs no device code (%s driver), so nothing is compiled for it: %w",
			d.Ordinal(), d.drv.Name(), ErrNotSupported)
	}
	if ptx {
		return fmt.Sprintf("compute_%d%d", major, minor), nil
	}
	return fmt.Sprintf("sm_%d%d", major, minor), nil
}

// Compile compiles source for c's device (unless opts.Arch says otherwise) and loads it
// into c. The module's Function takes the program's name expressions as names.
func (c *Context) Compile(source string, opts CompileOptions) (*Module, error) {
	if err := c.valid(); err != nil {
		return nil, err
	}
	if opts.Arch == "" {
		arch, err := c.dev.Arch(opts.PTX)
		if err != nil {
			return nil, err
		}
		opts.Arch = arch
	}
	p, err := Compile(source, opts)
	if err != nil {
		return nil, err
	}
	m, err := c.LoadModule(p.Image)
	if err != nil {
		return nil, err
	}
	m.program = p
	return m, nil
}
