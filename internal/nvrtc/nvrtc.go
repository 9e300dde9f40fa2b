// Package nvrtc is NVIDIA's runtime compiler, libnvrtc, opened at run time with purego:
// CUDA C++ source to PTX or cubin. Nothing happens at import; the first Compile opens the
// library, once, and a failure is remembered (ErrNoNVRTC).
package nvrtc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// ErrNoNVRTC is returned, wrapped with the reason, when libnvrtc cannot be opened.
var ErrNoNVRTC = errors.New("no NVRTC (libnvrtc.so)")

// Result is an nvrtcResult.
type Result int32

// Success and CompilationFailed are the nvrtcResults callers meet.
const (
	Success           Result = 0
	CompilationFailed Result = 6 // NVRTC_ERROR_COMPILATION
)

var (
	loadOnce sync.Once
	loadErr  error
	libPath  string

	nvrtcVersion, nvrtcGetErrorString               uintptr
	nvrtcCreateProgram, nvrtcDestroyProgram         uintptr
	nvrtcCompileProgram, nvrtcAddNameExpression     uintptr
	nvrtcGetProgramLogSize, nvrtcGetProgramLog      uintptr
	nvrtcGetPTXSize, nvrtcGetPTX, nvrtcGetCUBINSize uintptr
	nvrtcGetCUBIN, nvrtcGetLoweredName              uintptr
)

// candidates are the libraries tried, in order: STREAMBRIDGE_LIBNVRTC, the loader's search
// path by soname (newest first), then CUDA_HOME's and /usr/local/cuda's library folders.
func candidates() []string {
	if p := os.Getenv("STREAMBRIDGE_LIBNVRTC"); p != "" {
		return []string{p}
	}
	names := []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"}
	out := append([]string(nil), names...)
	for _, root := range []string{os.Getenv("CUDA_HOME"), "/usr/local/cuda"} {
		if root == "" {
			continue
		}
		for _, dir := range []string{"lib64", "targets/x86_64-linux/lib", "lib"} {
			for _, n := range names {
				out = append(out, filepath.Join(root, dir, n))
			}
		}
	}
	return out
}

func load() error {
	var lib uintptr
	var first error
	tried := candidates()
	for _, path := range tried {
		h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err == nil {
			lib, libPath = h, path
			break
		}
		if first == nil {
			first = err
		}
	}
	if lib == 0 {
		return fmt.Errorf("%w: %v (tried %d names and paths; STREAMBRIDGE_LIBNVRTC names one)", ErrNoNVRTC, first, len(tried))
	}
	for name, addr := range map[string]*uintptr{
		"nvrtcVersion": &nvrtcVersion, "nvrtcGetErrorString": &nvrtcGetErrorString,
		"nvrtcCreateProgram": &nvrtcCreateProgram, "nvrtcDestroyProgram": &nvrtcDestroyProgram,
		"nvrtcCompileProgram": &nvrtcCompileProgram, "nvrtcAddNameExpression": &nvrtcAddNameExpression,
		"nvrtcGetProgramLogSize": &nvrtcGetProgramLogSize, "nvrtcGetProgramLog": &nvrtcGetProgramLog,
		"nvrtcGetPTXSize": &nvrtcGetPTXSize, "nvrtcGetPTX": &nvrtcGetPTX,
		"nvrtcGetCUBINSize": &nvrtcGetCUBINSize, "nvrtcGetCUBIN": &nvrtcGetCUBIN,
		"nvrtcGetLoweredName": &nvrtcGetLoweredName,
	} {
		a, err := purego.Dlsym(lib, name)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrNoNVRTC, libPath, err)
		}
		*addr = a
	}
	return nil
}

// Load opens libnvrtc, once. It returns ErrNoNVRTC (wrapped) where there is none.
func Load() error {
	loadOnce.Do(func() { loadErr = load() })
	return loadErr
}

// Version is NVRTC's (major, minor), and the library file it came from.
func Version() (major, minor int, path string, err error) {
	if err := Load(); err != nil {
		return 0, 0, "", err
	}
	var ma, mi int32
	r := call(nvrtcVersion, uintptr(unsafe.Pointer(&ma)), uintptr(unsafe.Pointer(&mi)))
	return int(ma), int(mi), libPath, check("nvrtcVersion", r)
}

// Error is a failed NVRTC call; for a failed compile Log is the compiler's whole log.
type Error struct {
	Call   string
	Result Result
	Log    string
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%s: %s", e.Call, e.Result)
	if e.Log != "" {
		msg += "\n" + e.Log
	}
	return msg
}

func (r Result) String() string {
	if Load() != nil || nvrtcGetErrorString == 0 {
		return fmt.Sprintf("nvrtcResult(%d)", int32(r))
	}
	p, _, _ := purego.SyscallN(nvrtcGetErrorString, uintptr(r))
	return cString(p)
}

// call calls an NVRTC function. Arguments converted from unsafe.Pointer in the call
// expression keep what they point to on the heap and alive for the call, as with
// purego.SyscallN itself; without the directive a Go stack that moved during the call would
// leave the library writing to the old stack (seen: a program handle that read back 0).
//
//go:uintptrescapes
func call(fn uintptr, args ...uintptr) Result {
	r, _, _ := purego.SyscallN(fn, args...)
	return Result(int32(r))
}

func check(name string, r Result) error {
	if r == Success {
		return nil
	}
	return &Error{Call: name, Result: r}
}

// cString copies a NUL-terminated C string owned by the library.
func cString(p uintptr) string {
	if p == 0 {
		return ""
	}
	base := *(*unsafe.Pointer)(unsafe.Pointer(&p)) // C memory: the collector ignores it
	n := 0
	for *(*byte)(unsafe.Add(base, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(base), n))
}

// cStrings holds NUL-terminated copies of strings and an array of pointers to them, in Go
// memory (which does not move); keep the value alive across the call that reads them.
type cStrings struct {
	bufs [][]byte
	ptrs []uintptr
}

func newCStrings(ss []string) *cStrings {
	c := &cStrings{}
	for _, s := range ss {
		b := append([]byte(s), 0)
		c.bufs = append(c.bufs, b)
		c.ptrs = append(c.ptrs, uintptr(unsafe.Pointer(&b[0])))
	}
	return c
}

func (c *cStrings) array() uintptr {
	if len(c.ptrs) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(&c.ptrs[0]))
}

// Input is one compilation.
type Input struct {
	Source          string
	Name            string            // the program's name in the log ("program.cu" if empty)
	Options         []string          // as nvcc takes them: --gpu-architecture=sm_90, -I..., -D...
	Headers         map[string]string // in-memory headers by include name
	NameExpressions []string          // e.g. "scale<float>": their lowered names come back
	Cubin           bool              // cubin (needs an sm_ architecture) rather than PTX
}

// Output is a compiled program.
type Output struct {
	Image   []byte            // PTX text (NUL-terminated) or a cubin
	Log     string            // the compiler's log (warnings), possibly empty
	Lowered map[string]string // name expression -> mangled name
}

// Compile compiles in.Source. A compile error is *Error with Result CompilationFailed and
// the full log.
func Compile(in Input) (*Output, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	name := in.Name
	if name == "" {
		name = "program.cu"
	}
	src, progName := newCStrings([]string{in.Source}), newCStrings([]string{name})
	var hdrNames, hdrSrcs []string
	for n, s := range in.Headers {
		hdrNames, hdrSrcs = append(hdrNames, n), append(hdrSrcs, s)
	}
	hNames, hSrcs := newCStrings(hdrNames), newCStrings(hdrSrcs)
	var prog uintptr
	r := call(nvrtcCreateProgram, uintptr(unsafe.Pointer(&prog)), src.ptrs[0], progName.ptrs[0],
		uintptr(len(hdrNames)), hSrcs.array(), hNames.array())
	runtime.KeepAlive(src)
	runtime.KeepAlive(progName)
	runtime.KeepAlive(hNames)
	runtime.KeepAlive(hSrcs)
	if err := check("nvrtcCreateProgram", r); err != nil {
		return nil, err
	}
	defer call(nvrtcDestroyProgram, uintptr(unsafe.Pointer(&prog)))

	exprs := newCStrings(in.NameExpressions)
	for i := range in.NameExpressions {
		if err := check("nvrtcAddNameExpression", call(nvrtcAddNameExpression, prog, exprs.ptrs[i])); err != nil {
			return nil, fmt.Errorf("name expression %q: %w", in.NameExpressions[i], err)
		}
	}
	opts := newCStrings(in.Options)
	r = call(nvrtcCompileProgram, prog, uintptr(len(in.Options)), opts.array())
	runtime.KeepAlive(opts)
	log, logErr := programLog(prog)
	if r != Success {
		return nil, &Error{Call: "nvrtcCompileProgram", Result: r, Log: log}
	}
	if logErr != nil {
		return nil, logErr
	}
	out := &Output{Log: log, Lowered: map[string]string{}}
	sizeFn, getFn, what := nvrtcGetPTXSize, nvrtcGetPTX, "nvrtcGetPTX"
	if in.Cubin {
		sizeFn, getFn, what = nvrtcGetCUBINSize, nvrtcGetCUBIN, "nvrtcGetCUBIN"
	}
	var size uintptr
	if err := check(what+"Size", call(sizeFn, prog, uintptr(unsafe.Pointer(&size)))); err != nil {
		return nil, err
	}
	out.Image = make([]byte, size)
	if size > 0 {
		if err := check(what, call(getFn, prog, uintptr(unsafe.Pointer(&out.Image[0])))); err != nil {
			return nil, err
		}
	}
	for i, e := range in.NameExpressions {
		var lowered uintptr
		r := call(nvrtcGetLoweredName, prog, exprs.ptrs[i], uintptr(unsafe.Pointer(&lowered)))
		if err := check("nvrtcGetLoweredName", r); err != nil {
			return nil, fmt.Errorf("name expression %q: %w", e, err)
		}
		out.Lowered[e] = cString(lowered) // owned by the program: copied before destroy
	}
	runtime.KeepAlive(exprs)
	return out, nil
}

func programLog(prog uintptr) (string, error) {
	var size uintptr
	if err := check("nvrtcGetProgramLogSize", call(nvrtcGetProgramLogSize, prog, uintptr(unsafe.Pointer(&size)))); err != nil {
		return "", err
	}
	if size <= 1 {
		return "", nil
	}
	buf := make([]byte, size)
	if err := check("nvrtcGetProgramLog", call(nvrtcGetProgramLog, prog, uintptr(unsafe.Pointer(&buf[0])))); err != nil {
		return "", err
	}
	return string(buf[:size-1]), nil
}
