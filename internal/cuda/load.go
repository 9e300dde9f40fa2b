// Package cuda is the real CUDA driver: libcuda.so.1 opened at run time with purego, its
// entry points resolved once from the table in symbols.go, and the driver.API methods over
// them. Nothing here runs at import; the first call of Load does the work, once.
package cuda

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/streambridge/streambridge/internal/driver"
)

// ErrNoDriver is returned, wrapped with the reason, when libcuda cannot be used.
var ErrNoDriver = errors.New("no CUDA driver")

// Library is the file dlopen is asked for; STREAMBRIDGE_LIBCUDA overrides it.
const Library = "libcuda.so.1"

const getProcAddressLegacyStream = 1 // CU_GET_PROC_ADDRESS_LEGACY_STREAM

var (
	loadOnce sync.Once
	loadErr  error
	// hostFuncTrampoline is the one C-callable entry point for every host function.
	hostFuncTrampoline uintptr
)

// Driver is the real driver. Its zero value is ready once Load succeeded.
type Driver struct{}

// Load opens libcuda, resolves the symbol table and calls cuInit(0). It runs once; later
// calls return the first result.
func Load() (*Driver, error) {
	loadOnce.Do(func() { loadErr = load() })
	if loadErr != nil {
		return nil, loadErr
	}
	return &Driver{}, nil
}

func load() error {
	path := Library
	if p := os.Getenv("STREAMBRIDGE_LIBCUDA"); p != "" {
		path = p
	}
	lib, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoDriver, err)
	}
	if err := checkVersion(lib); err != nil {
		return err
	}
	resolve, err := resolver(lib)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoDriver, err)
	}
	for _, e := range driver.EntryPoints {
		addr, err := resolve(e)
		if err != nil && e.Flags&driver.Optional == 0 {
			return fmt.Errorf("%w: %s: %v", ErrNoDriver, e.Name, err)
		}
		*addresses[e.Name] = addr
	}
	if r := driver.Result(call(cuInit, 0)); r != driver.Success {
		return &initError{r}
	}
	driver.SetDescriber(describe)
	if err := bindCallbackThreads(); err != nil {
		return fmt.Errorf("%w: binding the driver's threads to Go for host functions: %v", ErrNoDriver, err)
	}
	hostFuncTrampoline = hostFuncEntry()
	return nil
}

// checkVersion refuses a driver older than driver.MinVersion before any symbol is looked up,
// naming both versions and the entry point that needs the newer one: resolving would fail
// on that symbol, with an error that does not say the driver is too old.
// cuDriverGetVersion needs no cuInit.
func checkVersion(lib uintptr) error {
	get, err := purego.Dlsym(lib, "cuDriverGetVersion")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoDriver, err)
	}
	v := new(int32)
	r, _, _ := purego.SyscallN(get, uintptr(unsafe.Pointer(v)))
	if r != 0 {
		return fmt.Errorf("%w: cuDriverGetVersion: %v", ErrNoDriver, driver.Result(r))
	}
	if int(*v) >= driver.MinVersion {
		return nil
	}
	newest := ""
	for _, e := range driver.EntryPoints {
		if e.Flags&driver.Optional == 0 && e.Version == driver.MinVersion {
			newest = e.Name
			break
		}
	}
	return fmt.Errorf("%w: the CUDA driver is version %s; streambridge needs %s or newer (%s): update the NVIDIA driver",
		ErrNoDriver, versionString(int(*v)), versionString(driver.MinVersion), newest)
}

// versionString is a CUDA version as cuDriverGetVersion gives it, as "12.0".
func versionString(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }

// initError is a driver that loaded but would not initialise (no device, say). It is
// both ErrNoDriver and the driver's result.
type initError struct{ r driver.Result }

// Error names the failed cuInit.
func (e *initError) Error() string { return fmt.Sprintf("%v: cuInit: %v", ErrNoDriver, e.r) }

// Unwrap makes the error match both ErrNoDriver and the driver's result.
func (e *initError) Unwrap() []error { return []error{ErrNoDriver, e.r} }

// resolver returns how to find a symbol: cuGetProcAddress with the symbol's ABI version
// where the driver has it (as the CUDA runtime does), else the exported versioned name.
func resolver(lib uintptr) (func(driver.EntryPoint) (uintptr, error), error) {
	if gpa, err := purego.Dlsym(lib, "cuGetProcAddress_v2"); err == nil {
		return func(e driver.EntryPoint) (uintptr, error) {
			var fn uintptr
			var status int32
			name := cstring(e.Name)
			r0, _, _ := purego.SyscallN(gpa, uintptr(unsafe.Pointer(&name[0])), uintptr(unsafe.Pointer(&fn)),
				uintptr(e.Version), getProcAddressLegacyStream, uintptr(unsafe.Pointer(&status)))
			r := driver.Result(r0)
			if r != driver.Success || fn == 0 {
				return purego.Dlsym(lib, e.Export)
			}
			return fn, nil
		}, nil
	}
	return func(e driver.EntryPoint) (uintptr, error) { return purego.Dlsym(lib, e.Export) }, nil
}

func describe(r driver.Result) (string, string, bool) {
	rn, name := callOut(cuGetErrorName, 1, uintptr(r), 0)
	rm, msg := callOut(cuGetErrorString, 1, uintptr(r), 0)
	if res(rn) != driver.Success || res(rm) != driver.Success {
		return "", "", false
	}
	return gostring(name), gostring(msg), true
}

func cstring(s string) []byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return b
}

// gostring copies a NUL-terminated C string the driver owns.
func gostring(addr uint64) string {
	p := *(**byte)(unsafe.Pointer(&addr))
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}
